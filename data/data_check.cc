#include "data/data_check.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/bad_line.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "data/parquet_rows.h"
#include "data/parser.h"

namespace pstrain::worker {
namespace {

// CheckFile for a Parquet file: its columns bind to the schema's and its
// first rows (of the first row group) parse.
absl::Status CheckParquetFile(const InputFile& file, const Schema& schema,
                              const DataCheckOptions& options, int64_t* lines) {
  if (!schema.custom || schema.column_names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, " is a Parquet file: its columns are read by name, so give a schema file "
                   "(--schema) that names them"));
  }
  ParquetRows rows(schema);
  PS_RETURN_IF_ERROR(rows.Open(file.path, 0, file.size));
  ParsedRow row;
  std::string why, first_error;
  int checked = 0, bad = 0;
  while (checked < options.lines_to_check) {
    PS_ASSIGN_OR_RETURN(bool more, rows.Next(&row, &why));
    if (!more) break;
    ++checked;
    if (!why.empty()) {
      ++bad;
      if (first_error.empty()) first_error = absl::StrCat(rows.Where(), ": ", why);
    }
  }
  *lines += checked;
  if (checked > 0 && 2 * bad > checked) {
    return absl::InvalidArgumentError(absl::StrCat(first_error, " (", bad, " of its first ",
                                                   checked, " rows are bad)"));
  }
  return absl::OkStatus();
}

// Adds the data lines seen (at most options.lines_to_check) to `*lines`.
absl::Status CheckFile(const InputFile& file, const Parser& parser,
                       const DataCheckOptions& options, int64_t* lines) {
  // The readers' own line reader, with their line limit; it decompresses
  // compressed files, so data the readers could not decode fails here.
  constexpr size_t kBuffer = 64 << 10;
  LineReader reader(kBuffer, parser.schema().max_line_bytes);
  PS_RETURN_IF_ERROR(reader.Open(file, 0, file.size));
  ParsedRow row;
  std::vector<std::string> partition;  // the file's partition columns' values
  if (!parser.schema().partition_columns.empty()) {
    PS_ASSIGN_OR_RETURN(partition, PartitionValues(file.path, parser.schema().partition_columns));
    row.partition = &partition;
  }
  int checked = 0, bad = 0;
  std::string first_error;  // FILE:LINE: reason; the line: "..."
  LineReader::Line line;
  while (checked < options.lines_to_check) {
    PS_ASSIGN_OR_RETURN(bool more, reader.Next(&line));  // DataLoss: undecodable
    if (!more) break;
    if (line.offset == 0 && parser.schema().header) {
      absl::Status st = line.overlong ? absl::InvalidArgumentError("the header is too long")
                                      : parser.CheckHeader(line.text);
      if (!st.ok()) {
        return absl::InvalidArgumentError(
            BadLineMessage(absl::StrCat(file.path, ":1"), st.message(), line.text));
      }
      continue;
    }
    if (!line.overlong && (line.text.empty() || line.text == "\r")) continue;
    ++checked;
    absl::Status st = line.overlong ? absl::InvalidArgumentError("line too long")
                                    : parser.Parse(line.text, &row);
    if (!st.ok()) {
      ++bad;
      if (first_error.empty()) {
        // The reader starts at the file's first byte: index + 1 is the line number.
        first_error = BadLineMessage(absl::StrCat(file.path, ":", line.index + 1), st.message(),
                                     line.text);
      }
    }
  }
  *lines += checked;
  if (checked > 0 && 2 * bad > checked) {
    return absl::InvalidArgumentError(absl::StrCat(first_error, " (", bad, " of its first ",
                                                   checked, " lines do not parse)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDataFiles(const std::vector<std::string>& patterns, const Schema& schema,
                            const DataCheckOptions& options) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<const Parser> parser, CreateParser(schema));
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns(patterns);
  if (!files.ok()) return Annotate(files.status(), options.flag);
  uint64_t bytes = 0;
  int64_t lines = 0;
  for (const InputFile& f : *files) {
    bytes += f.size;
    if (f.size > 0) {
      PS_RETURN_IF_ERROR(Annotate(f.parquet ? CheckParquetFile(f, schema, options, &lines)
                                            : CheckFile(f, *parser, options, &lines),
                                  options.flag));
    }
  }
  if (bytes > 0 && lines == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.flag, ": no data rows in ", files->size(), " file",
                     files->size() == 1 ? "" : "s", " (", (*files)[0].path,
                     schema.header ? " holds a header line only)" : " holds blank lines only)"));
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.flag, ": no data (", files->size(), " empty file",
                     files->size() == 1 ? "" : "s", ", the first ", (*files)[0].path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
