#include "data/schema_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/edit_distance.h"
#include "common/status.h"
#include "data/delimited_parser.h"
#include "data/file_set.h"
#include "data/label_rule.h"
#include "data/schema_columns.h"
#include "data/separator_sniff.h"
#include "data/time_parts.h"

namespace pstrain::worker {
namespace {

using nlohmann::json;

constexpr const char* kKeys[] = {"separator", "header",  "columns",       "num_columns",
                                 "label",     "dense",   "sparse",        "ignore",
                                 "weight",    "hash_buckets", "embedding_dim", "dense_transform",
                                 "max_line_bytes", "stats_rows", "format", "missing_values",
                                 "labels", "partition_columns"};
constexpr const char* kDenseKeys[] = {"column", "transform", "clip", "mean",
                                      "stddev", "missing",   "time"};
constexpr const char* kSparseKeys[] = {"column", "hash_buckets", "multi_hot", "pooling",
                                       "embedding_dim", "ids_like", "max_length", "time"};
constexpr const char* kLabelKeys[] = {"column", "op", "threshold"};

// The parse of one schema file, with its errors' prefix.
class Resolver {
 public:
  // `saved`: the schema a saved model records (SchemaJson), where a key
  // that models saved before it existed lack means what it meant then.
  Resolver(std::string source, const std::vector<std::string>& data_patterns,
           uint64_t default_buckets, bool saved)
      : source_(std::move(source)),
        default_buckets_(default_buckets),
        saved_(saved),
        columns_(source_, data_patterns, saved, &s_) {}

  absl::StatusOr<SchemaFile> Run(const json& j);

 private:
  template <typename... Parts>
  absl::Status Bad(const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat("schema ", source_, ": ", parts...));
  }
  template <size_t N>
  absl::Status CheckKeys(const json& j, const char* const (&keys)[N], const std::string& where) const;
  absl::StatusOr<char> Separator(const json& v, const std::string& key) const;
  absl::StatusOr<int> Column(const json& ref, const std::string& where) {
    return columns_.Resolve(ref, where);
  }
  // Reads a label (a column, "delay > 15", or {"column", "op",
  // "threshold"}) at `where` ("label", "labels.conversion").
  absl::Status Label(const json& v, const std::string& where, LabelColumn* label);
  absl::Status Labels(const json& v);
  absl::Status Dense(const json& v, size_t i, Transform default_transform);
  absl::Status Sparse(const json& v, size_t i);
  absl::StatusOr<Transform> TransformOf(const json& v, const std::string& where) const;
  // The entry's "time" part (kNone without one).
  absl::StatusOr<TimePart> TimeOf(const json& v, const std::string& where) const;
  absl::StatusOr<double> Number(const json& v, const std::string& where) const;
  absl::Status DenseMissing(const json& v, const std::string& where, DenseColumn* d) const;
  absl::Status MissingValues(const json& j);

  std::string source_;
  uint64_t default_buckets_;
  const bool saved_;
  Schema s_;
  SchemaColumns columns_;  // the column names, and references to them
  // (sparse field, column) of every "ids_like", resolved once all are read.
  std::vector<std::pair<size_t, int>> ids_like_;
  absl::Status IdsLike();
};

template <size_t N>
absl::Status Resolver::CheckKeys(const json& j, const char* const (&keys)[N],
                                 const std::string& where) const {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find_if(std::begin(keys), std::end(keys),
                     [&](const char* k) { return it.key() == k; }) == std::end(keys)) {
      return Bad(where, where.empty() ? "" : ": ", "unknown key \"", it.key(), "\"",
                 DidYouMeanQuoted(it.key(), std::vector<std::string>(std::begin(keys), std::end(keys))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<char> Resolver::Separator(const json& v, const std::string& key) const {
  if (!v.is_string()) return Bad(key, ": not a string");
  std::string t = v.get<std::string>();
  std::string lower = absl::AsciiStrToLower(t);
  if (lower == "tab" || t == "\\t") return '\t';
  if (lower == "comma") return ',';
  if (lower == "space") return ' ';
  if (lower == "pipe") return '|';
  if (lower == "semicolon") return ';';
  if (t.size() != 1 || t[0] == '\n' || t[0] == '\r' || t[0] == '"') {
    return Bad(key, ": \"", t, "\" is not one character (or tab, comma, space, pipe, semicolon)");
  }
  return t[0];
}


absl::StatusOr<double> Resolver::Number(const json& v, const std::string& where) const {
  if (!v.is_number()) return Bad(where, ": not a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) return Bad(where, ": not finite");
  return d;
}

absl::Status Resolver::Label(const json& v, const std::string& where, LabelColumn* out) {
  LabelColumn& label = *out;
  if (v.is_object()) {
    PS_RETURN_IF_ERROR(CheckKeys(v, kLabelKeys, where));
    if (!v.contains("column")) return Bad(where, ": no \"column\"");
    PS_ASSIGN_OR_RETURN(label.column, Column(v["column"], where));
    std::string op = v.value("op", std::string());
    if (!op.empty() || v.contains("threshold")) {
      if (!v.contains("threshold")) return Bad(where, ": \"op\" without \"threshold\"");
      PS_ASSIGN_OR_RETURN(label.threshold, Number(v["threshold"], where + ".threshold"));
      absl::StatusOr<LabelColumn::Op> parsed = ParseLabelOp(op.empty() ? ">" : op);
      if (!parsed.ok()) return Bad(where, ".op: ", parsed.status().message());
      label.op = *parsed;
    }
  } else if (v.is_string()) {
    // "clicked", or "delay > 15".
    absl::StatusOr<std::optional<LabelComparison>> c = ParseLabelComparison(v.get<std::string>());
    if (!c.ok()) return Bad(where, ": ", c.status().message());
    if (!c->has_value()) {
      PS_ASSIGN_OR_RETURN(label.column, Column(v, where));
    } else {
      json obj = {{"op", (*c)->op}, {"threshold", (*c)->threshold}};
      int64_t index;
      if (absl::SimpleAtoi((*c)->column, &index)) {
        obj["column"] = index;
      } else {
        obj["column"] = (*c)->column;
      }
      return Label(obj, where, out);
    }
  } else {
    PS_ASSIGN_OR_RETURN(label.column, Column(v, where));
  }
  if (label.name.empty()) {
    label.name = label.column < static_cast<int>(s_.column_names.size())
                     ? s_.column_names[label.column]
                     : absl::StrCat(label.column);
  }
  return absl::OkStatus();
}

absl::Status Resolver::Labels(const json& v) {
  if (!v.is_object()) {
    return Bad("labels: an object of named labels, e.g. {\"conversion\": \"converted\", "
               "\"long_view\": \"watch_secs > 30\"}");
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string where = absl::StrCat("labels.", it.key());
    if (it.key().empty()) return Bad("labels: a label without a name");
    if (it.key() == s_.label.name) {
      return Bad(where, ": the first label (\"label\") is already named \"", it.key(), "\"");
    }
    LabelColumn l;
    l.name = it.key();
    PS_RETURN_IF_ERROR(Label(it.value(), where, &l));
    if (l.column == s_.label.column) return Bad(where, ": column ", ColumnName(s_, l.column), " is the first label's");
    for (const LabelColumn& o : s_.extra_labels) {
      if (o.column == l.column) {
        return Bad(where, ": column ", ColumnName(s_, l.column), " is label \"", o.name, "\"'s too");
      }
    }
    s_.extra_labels.push_back(std::move(l));
  }
  return absl::OkStatus();
}

absl::StatusOr<Transform> Resolver::TransformOf(const json& v, const std::string& where) const {
  std::string t = v.is_string() ? absl::AsciiStrToLower(v.get<std::string>()) : "";
  if (t == "none") return Transform::kNone;
  if (t == "log1p") return Transform::kLog1p;
  if (t == "log1p_clamp") return Transform::kLog1pClamp;
  if (t == "standardize") return Transform::kStandardize;
  return Bad(where, ": unknown transform ", v.dump(),
             " (none, log1p, log1p_clamp, standardize)");
}

absl::Status Resolver::DenseMissing(const json& v, const std::string& where,
                                    DenseColumn* d) const {
  const bool standardize = d->transform == Transform::kStandardize;
  if (!v.contains("missing")) {
    // A model saved before the default became the mean read a missing
    // value of a standardized column as raw 0: it still does.
    d->missing_given = saved_ && standardize;
    d->missing = 0;
    return absl::OkStatus();
  }
  const json& m = v["missing"];
  if (m.is_string() && m.get<std::string>() == "mean") {
    if (!standardize) {
      return Bad(where, ".missing: \"mean\" is for \"transform\": \"standardize\" (give a number)");
    }
    d->missing_given = false;
    return absl::OkStatus();
  }
  PS_ASSIGN_OR_RETURN(d->missing, Number(m, where + ".missing"));
  d->missing_given = true;
  return absl::OkStatus();
}

absl::Status Resolver::MissingValues(const json& j) {
  if (!j.contains("missing_values")) {
    // Models saved before the key existed: only the empty field.
    if (saved_) s_.missing_tokens.clear();
    return absl::OkStatus();
  }
  const json& list = j["missing_values"];
  if (!list.is_array()) return Bad("missing_values: not a list of strings");
  s_.missing_tokens.clear();
  for (const json& t : list) {
    if (!t.is_string()) return Bad("missing_values: not a list of strings");
    s_.missing_tokens.push_back(t.get<std::string>());
  }
  absl::Status st = ValidateMissingTokens(s_.missing_tokens, s_.field_sep);
  return st.ok() ? st : Bad(st.message());
}


absl::StatusOr<TimePart> Resolver::TimeOf(const json& v, const std::string& where) const {
  if (!v.contains("time")) return TimePart::kNone;
  const json& t = v["time"];
  absl::StatusOr<TimePart> part = ParseTimePart(t.is_string() ? t.get<std::string>() : t.dump());
  if (!part.ok()) return Bad(where, ".time: ", part.status().message());
  return *part;
}

absl::Status Resolver::Dense(const json& v, size_t i, Transform default_transform) {
  const std::string where = absl::StrCat("dense[", i, "]");
  DenseColumn d;
  d.transform = default_transform;
  if (v.is_object()) {
    PS_RETURN_IF_ERROR(CheckKeys(v, kDenseKeys, where));
    if (!v.contains("column")) return Bad(where, ": no \"column\"");
    PS_ASSIGN_OR_RETURN(d.column, Column(v["column"], where));
    PS_ASSIGN_OR_RETURN(d.time, TimeOf(v, where));
    if (v.contains("transform")) {
      PS_ASSIGN_OR_RETURN(d.transform, TransformOf(v["transform"], where));
    }
    if (v.contains("clip")) {
      const json& c = v["clip"];
      if (!c.is_array() || c.size() != 2) return Bad(where, ".clip: not [low, high]");
      auto bound = [&](const json& b, double inf) -> absl::StatusOr<double> {
        if (b.is_null()) return inf;
        return Number(b, where + ".clip");
      };
      PS_ASSIGN_OR_RETURN(d.clip_lo, bound(c[0], -std::numeric_limits<double>::infinity()));
      PS_ASSIGN_OR_RETURN(d.clip_hi, bound(c[1], std::numeric_limits<double>::infinity()));
      if (!(d.clip_lo <= d.clip_hi)) return Bad(where, ".clip: low above high");
    }
    PS_RETURN_IF_ERROR(DenseMissing(v, where, &d));
    if (v.contains("mean") != v.contains("stddev")) {
      return Bad(where, ": \"mean\" and \"stddev\" go together");
    }
    if (v.contains("mean")) {
      if (d.transform != Transform::kStandardize) {
        return Bad(where, ": \"mean\"/\"stddev\" are for \"transform\": \"standardize\"");
      }
      PS_ASSIGN_OR_RETURN(d.mean, Number(v["mean"], where + ".mean"));
      PS_ASSIGN_OR_RETURN(d.stddev, Number(v["stddev"], where + ".stddev"));
      if (!(d.stddev > 0)) return Bad(where, ".stddev: must be > 0");
      d.has_stats = true;
    }
  } else {
    PS_ASSIGN_OR_RETURN(d.column, Column(v, where));
    PS_RETURN_IF_ERROR(DenseMissing(json::object(), where, &d));
  }
  d.name = d.column < static_cast<int>(s_.column_names.size()) ? s_.column_names[d.column]
                                                               : absl::StrCat(d.column);
  if (d.time != TimePart::kNone) absl::StrAppend(&d.name, "_", TimePartName(d.time));
  s_.dense.push_back(std::move(d));
  return absl::OkStatus();
}

absl::Status Resolver::Sparse(const json& v, size_t i) {
  const std::string where = absl::StrCat("sparse[", i, "]");
  SparseColumn c;
  c.hash_buckets = default_buckets_;
  if (v.is_object()) {
    PS_RETURN_IF_ERROR(CheckKeys(v, kSparseKeys, where));
    if (!v.contains("column")) return Bad(where, ": no \"column\"");
    PS_ASSIGN_OR_RETURN(c.column, Column(v["column"], where));
    PS_ASSIGN_OR_RETURN(c.time, TimeOf(v, where));
    if (c.time != TimePart::kNone && v.contains("multi_hot")) {
      return Bad(where, ".time: a time part is one value, not a multi_hot list");
    }
    if (v.contains("hash_buckets")) {
      const json& h = v["hash_buckets"];
      if (!h.is_number_unsigned() && !(h.is_number_integer() && h.get<int64_t>() >= 0)) {
        return Bad(where, ".hash_buckets: not a count >= 0 (0: unbounded ids)");
      }
      c.hash_buckets = h.get<uint64_t>();
    }
    if (v.contains("multi_hot")) {
      PS_ASSIGN_OR_RETURN(c.multi_hot_sep, Separator(v["multi_hot"], where + ".multi_hot"));
    }
    if (v.contains("pooling")) {
      std::string p = v["pooling"].is_string() ? v["pooling"].get<std::string>() : "";
      if (p == "sum") {
        c.pooling = BagPooling::kSum;
      } else if (p == "mean") {
        c.pooling = BagPooling::kMean;
      } else {
        return Bad(where, ".pooling: ", v["pooling"].dump(), " is not sum or mean");
      }
    }
    if (v.contains("ids_like")) {
      PS_ASSIGN_OR_RETURN(int owner, Column(v["ids_like"], where + ".ids_like"));
      ids_like_.emplace_back(i, owner);
    }
    if (v.contains("max_length")) {
      const json& m = v["max_length"];
      if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > 100000) {
        return Bad(where, ".max_length: ", m.dump(), " is not in [1, 100000]");
      }
      if (!v.contains("multi_hot") && !columns_.IsParquetList(c.column)) {
        return Bad(where, ".max_length: only a multi_hot column (a list of ids) has a length");
      }
      c.max_length = m.get<int>();
    }
    if (v.contains("embedding_dim")) {
      const json& e = v["embedding_dim"];
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 4096) {
        return Bad(where, ".embedding_dim: ", e.dump(), " is not in [1, 4096]");
      }
      c.embedding_dim = e.get<int>();
    }
  } else {
    PS_ASSIGN_OR_RETURN(c.column, Column(v, where));
  }
  c.name = c.column < static_cast<int>(s_.column_names.size()) ? s_.column_names[c.column]
                                                               : absl::StrCat(c.column);
  if (c.time != TimePart::kNone) absl::StrAppend(&c.name, "_", TimePartName(c.time));
  // A Parquet LIST is multi-hot by itself; '|' is its separator should the
  // same schema read text (a saved model's `pstrain predict`).
  if (columns_.IsParquetList(c.column) && c.multi_hot_sep == 0 && c.time == TimePart::kNone) {
    c.multi_hot_sep = '|';
  }
  if (c.multi_hot_sep != 0 && c.multi_hot_sep == s_.field_sep) {
    return Bad(where, ".multi_hot: the same character as the separator");
  }
  s_.sparse.push_back(std::move(c));
  return absl::OkStatus();
}

absl::Status Resolver::IdsLike() {
  for (const auto& [field, column] : ids_like_) {
    const std::string where = absl::StrCat("sparse[", field, "].ids_like");
    int owner = -1;
    for (size_t g = 0; g < s_.sparse.size(); ++g) {
      if (s_.sparse[g].column == column) owner = static_cast<int>(g);
    }
    if (owner < 0) {
      return Bad(where, ": column ", ColumnName(s_, column), " is not a sparse column");
    }
    if (owner == static_cast<int>(field)) return Bad(where, ": a column's ids are its own already");
    SparseColumn& c = s_.sparse[field];
    const SparseColumn& o = s_.sparse[owner];
    for (const auto& [other, unused] : ids_like_) {
      if (static_cast<int>(other) == owner) {
        return Bad(where, ": \"", o.name, "\" takes its ids from another column itself; name that one");
      }
    }
    if (c.hash_buckets != o.hash_buckets) {
      return Bad(where, ": \"", c.name, "\" has hash_buckets ", c.hash_buckets, ", \"", o.name,
                 "\" ", o.hash_buckets, "; columns sharing ids share their hash size");
    }
    c.ids_of = owner;
  }
  return absl::OkStatus();
}

absl::StatusOr<SchemaFile> Resolver::Run(const json& j) {
  if (!j.is_object()) return Bad("not a JSON object");
  PS_RETURN_IF_ERROR(CheckKeys(j, kKeys, ""));
  SchemaFile out;
  s_.custom = true;
  s_.source = source_;
  s_.field_sep = '\t';
  if (j.contains("format")) {
    std::string f = j["format"].is_string() ? j["format"].get<std::string>() : "";
    if (f == "csv") {
      s_.field_sep = ',';
    } else if (f == "parquet") {
      s_.parquet = true;
    } else if (f != "tsv") {
      return Bad("format: ", j["format"].dump(),
                 " is not csv, tsv or parquet (or give \"separator\")");
    }
  }
  if (j.contains("separator")) {
    PS_ASSIGN_OR_RETURN(s_.field_sep, Separator(j["separator"], "separator"));
  }
  if (j.contains("header")) {
    if (!j["header"].is_boolean()) return Bad("header: not true or false");
    s_.header = j["header"].get<bool>();
  }
  if (j.contains("max_line_bytes")) {
    if (!j["max_line_bytes"].is_number_unsigned()) return Bad("max_line_bytes: not a count");
    s_.max_line_bytes = j["max_line_bytes"].get<uint64_t>();
  }
  if (j.contains("hash_buckets")) {
    if (!j["hash_buckets"].is_number_unsigned()) return Bad("hash_buckets: not a count >= 0");
    default_buckets_ = j["hash_buckets"].get<uint64_t>();
  }
  if (j.contains("embedding_dim")) {
    const json& e = j["embedding_dim"];
    if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 4096) {
      return Bad("embedding_dim: not in [1, 4096]");
    }
    out.embedding_dim = e.get<int>();
  }
  if (j.contains("stats_rows")) {
    if (!j["stats_rows"].is_number_unsigned() || j["stats_rows"].get<int64_t>() < 1) {
      return Bad("stats_rows: not a count >= 1");
    }
    out.stats_rows = j["stats_rows"].get<int64_t>();
  }
  PS_RETURN_IF_ERROR(MissingValues(j));
  if (j.contains("weight")) {
    return Bad("weight: weight columns are not built yet (every row weighs 1); leave the "
               "column out with \"ignore\"");
  }
  PS_RETURN_IF_ERROR(columns_.Read(j));
  PS_RETURN_IF_ERROR(columns_.Partitions(j));
  if (!j.contains("label")) return Bad("no \"label\" (a column name or index, or \"delay > 15\")");
  PS_RETURN_IF_ERROR(Label(j["label"], "label", &s_.label));
  if (j.contains("labels")) PS_RETURN_IF_ERROR(Labels(j["labels"]));
  Transform default_transform = Transform::kNone;
  if (j.contains("dense_transform")) {
    PS_ASSIGN_OR_RETURN(default_transform, TransformOf(j["dense_transform"], "dense_transform"));
  }
  for (const char* key : {"dense", "sparse"}) {
    if (j.contains(key) && !j[key].is_array()) return Bad(key, ": not a list of columns");
  }
  if (j.contains("dense")) {
    for (size_t i = 0; i < j["dense"].size(); ++i) {
      PS_RETURN_IF_ERROR(Dense(j["dense"][i], i, default_transform));
    }
  }
  if (j.contains("sparse")) {
    for (size_t i = 0; i < j["sparse"].size(); ++i) {
      PS_RETURN_IF_ERROR(Sparse(j["sparse"][i], i));
    }
  }
  PS_RETURN_IF_ERROR(IdsLike());
  if (s_.dense.empty() && s_.sparse.empty()) return Bad("no \"dense\" and no \"sparse\" columns");
  bool ignore_rest = false;
  std::vector<int> ignored;
  if (j.contains("ignore")) {
    const json& ig = j["ignore"];
    if (ig.is_string() && ig.get<std::string>() == "rest") {
      ignore_rest = true;
    } else if (ig.is_array()) {
      for (size_t i = 0; i < ig.size(); ++i) {
        PS_ASSIGN_OR_RETURN(int c, Column(ig[i], absl::StrCat("ignore[", i, "]")));
        ignored.push_back(c);
      }
    } else {
      return Bad("ignore: a list of columns, or \"rest\"");
    }
  }
  if (!s_.column_names.empty()) {
    s_.num_columns = static_cast<int>(s_.column_names.size());
  } else if (j.contains("num_columns")) {
    if (!j["num_columns"].is_number_unsigned()) return Bad("num_columns: not a count");
    s_.num_columns = j["num_columns"].get<int>();
    if (s_.num_columns <= columns_.max_index()) {
      return Bad("num_columns: ", s_.num_columns, " but column ", columns_.max_index(), " is used");
    }
  } else {
    s_.num_columns = columns_.max_index() + 1;
  }
  // Every column has a role: a column left out is a typo more often than not.
  std::vector<bool> has_role(s_.num_columns, ignore_rest);
  has_role[s_.label.column] = true;
  for (const LabelColumn& l : s_.extra_labels) has_role[l.column] = true;
  for (const DenseColumn& d : s_.dense) has_role[d.column] = true;
  for (const SparseColumn& c : s_.sparse) has_role[c.column] = true;
  for (int c : ignored) has_role[c] = true;
  std::vector<std::string> left;
  for (int c = 0; c < s_.num_columns; ++c) {
    if (!has_role[c]) left.push_back(ColumnName(s_, c));
  }
  if (!left.empty()) {
    return Bad("column", left.size() == 1 ? " " : "s ", absl::StrJoin(left, ", "),
               " ha", left.size() == 1 ? "s" : "ve",
               " no role: list them under \"dense\", \"sparse\" or \"ignore\" "
               "(or \"ignore\": \"rest\")");
  }
  s_.num_dense = static_cast<int>(s_.dense.size());
  s_.num_sparse = static_cast<int>(s_.sparse.size());
  PS_RETURN_IF_ERROR(ValidateSchema(s_));
  out.schema = std::move(s_);
  return out;
}

}  // namespace

absl::StatusOr<SchemaFile> ParseSchemaJson(const std::string& text, const std::string& source,
                                           const std::vector<std::string>& data_patterns,
                                           uint64_t default_buckets) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) {
    // Parse again for the position of the error.
    try {
      (void)json::parse(text, nullptr, true, true);
    } catch (const json::parse_error& e) {
      return absl::InvalidArgumentError(absl::StrCat("schema ", source, ": not JSON: ", e.what()));
    }
    return absl::InvalidArgumentError(absl::StrCat("schema ", source, ": not JSON"));
  }
  return Resolver(source, data_patterns, default_buckets, /*saved=*/false).Run(j);
}

absl::StatusOr<SchemaFile> LoadSchemaFile(const std::string& path,
                                          const std::vector<std::string>& data_patterns,
                                          uint64_t default_buckets) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("schema ", path, ": cannot open it"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseSchemaJson(text.str(), path, data_patterns, default_buckets);
}

absl::StatusOr<Schema> SchemaFromJson(const json& j, const std::string& source) {
  PS_ASSIGN_OR_RETURN(SchemaFile f, Resolver(source, {}, 0, /*saved=*/true).Run(j));
  return std::move(f.schema);
}

}  // namespace pstrain::worker
