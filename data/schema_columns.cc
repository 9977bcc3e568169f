#include "data/schema_columns.h"

#include <algorithm>
#include <memory>
#include <string_view>

#include "common/edit_distance.h"
#include "common/status.h"
#include "data/delimited_parser.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "data/parquet/parquet_file.h"
#include "data/separator_sniff.h"

namespace pstrain::worker {

using nlohmann::json;

absl::Status SchemaColumns::Read(const json& j) {
  if (j.contains("columns")) {
    const json& c = j["columns"];
    if (!c.is_array()) return Bad("columns: not a list of names");
    for (const json& n : c) {
      if (!n.is_string()) return Bad("columns: not a list of names");
      s_->column_names.push_back(n.get<std::string>());
    }
    names_from_ = "\"columns\"";
    return absl::OkStatus();
  }
  if (patterns_.empty()) return absl::OkStatus();  // resolved later, or by index only
  // The first file says whether the data is Parquet (by its magic), so its
  // files are looked at even without a header; the reader reports a
  // missing file of a schema that names no columns.
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns(patterns_);
  if (!files.ok()) return s_->header || s_->parquet ? files.status() : absl::OkStatus();
  const InputFile& first = files->front();
  if (first.parquet || s_->parquet) {
    // A Parquet file names its columns: the first file's are the schema's.
    if (!first.parquet) {
      return Bad("\"format\": \"parquet\", but ", first.path, " is not a Parquet file");
    }
    PS_ASSIGN_OR_RETURN(std::unique_ptr<parquet::ParquetFile> file, parquet::ParquetFile::Open(first.path));
    for (const parquet::ColumnDescriptor& c : file->columns()) {
      s_->column_names.push_back(c.name);
      parquet_lists_.push_back(c.is_list);
    }
    s_->parquet = true;
    s_->header = false;
    names_from_ = absl::StrCat("the columns of ", first.path);
    return absl::OkStatus();
  }
  if (!s_->header) return absl::OkStatus();
  LineReader reader(64 << 10, s_->max_line_bytes);
  PS_RETURN_IF_ERROR(reader.Open(first, 0, 1));  // decompressed when compressed
  LineReader::Line line;
  PS_ASSIGN_OR_RETURN(bool more, reader.Next(&line));
  if (!more || line.overlong) {
    return Bad("\"header\": true, but ", first.path, more ? " has an overlong first line"
                                                          : " is empty");
  }
  std::string_view text = line.text;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  std::vector<std::string_view> cols;
  SplitColumns(text, s_->field_sep, &cols);
  for (std::string_view c : cols) s_->column_names.emplace_back(c);
  names_from_ = absl::StrCat("the header of ", first.path);
  header_line_ = std::string(text);
  return absl::OkStatus();
}

absl::Status SchemaColumns::Partitions(const json& j) {
  if (!j.contains("partition_columns")) return absl::OkStatus();
  const json& p = j["partition_columns"];
  if (!p.is_array() || p.empty()) {
    return Bad("partition_columns: not a list of names (the KEY of folders named KEY=VALUE)");
  }
  if (s_->column_names.empty()) {
    return Bad("partition_columns: the files' own columns need names too (\"header\": true, "
               "\"columns\": [...], or Parquet files)");
  }
  for (const json& n : p) {
    const std::string name = n.is_string() ? n.get<std::string>() : std::string();
    if (name.empty() || name.find_first_of("/=") != std::string::npos) {
      return Bad("partition_columns: ", n.dump(), " is not a folder key (a name without '/' or '=')");
    }
    if (std::find(s_->column_names.begin(), s_->column_names.end(), name) != s_->column_names.end()) {
      return Bad("partition_columns: \"", name, "\" is also a column of ", names_from_,
                 " (or named twice)");
    }
    s_->column_names.push_back(name);
    s_->partition_columns.push_back(name);
  }
  if (patterns_.empty() || saved_) return absl::OkStatus();
  // The first file says now what every file will (each is checked as it is read).
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns(patterns_);
  if (!files.ok()) return absl::OkStatus();  // the data check says so
  absl::StatusOr<std::vector<std::string>> values =
      PartitionValues(files->front().path, s_->partition_columns);
  if (!values.ok()) return Bad(values.status().message());
  return absl::OkStatus();
}

absl::StatusOr<int> SchemaColumns::Resolve(const json& ref, const std::string& where) {
  int index = -1;
  if (ref.is_number_integer()) {
    int64_t v = ref.get<int64_t>();
    if (v < 0 || v > 65535) return Bad(where, ": column index ", v, " outside [0, 65535]");
    index = static_cast<int>(v);
    if (!s_->column_names.empty() && index >= static_cast<int>(s_->column_names.size())) {
      return Bad(where, ": column index ", index, " but ", names_from_, " has ",
                 s_->column_names.size(), " columns", HeaderHint());
    }
  } else if (ref.is_string()) {
    std::string name = ref.get<std::string>();
    if (s_->column_names.empty()) {
      return Bad(where, ": column \"", name,
                 "\" by name, but no names are known: set \"header\": true (names from the "
                 "first line of the data) or \"columns\": [...], or give its index");
    }
    auto it = std::find(s_->column_names.begin(), s_->column_names.end(), name);
    if (it == s_->column_names.end()) {
      return Bad(where, ": no column \"", name, "\" in ", names_from_,
                 DidYouMeanQuoted(name, s_->column_names), HeaderHint());
    }
    index = static_cast<int>(it - s_->column_names.begin());
  } else {
    return Bad(where, ": a column is a name or a 0-based index");
  }
  max_index_ = std::max(max_index_, index);
  return index;
}

std::string SchemaColumns::HeaderHint() const {
  if (header_line_.empty() || s_->column_names.size() != 1) return "";
  const char sep = SniffSeparator(header_line_, s_->field_sep, 0);
  if (sep == 0) return "";
  return absl::StrCat("; the header is one column, \"", header_line_.substr(0, 80),
                      header_line_.size() > 80 ? "..." : "", "\": the file seems to be separated by ",
                      SeparatorName(sep), " (", SeparatorAdvice(*s_, sep), ")");
}

}  // namespace pstrain::worker
