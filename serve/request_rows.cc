#include "serve/request_rows.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "data/batch_builder.h"
#include "data/delimited_parser.h"
#include "data/separator_sniff.h"

namespace pstrain::worker {
namespace {

using json = nlohmann::json;

absl::Status RowError(int row, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("row ", row, ": ", s.message()));
}

// The multi-hot separator of column `c` (0: single token or not categorical).
char ColumnMultiHotSep(const Schema& schema, int c) {
  if (!schema.custom) return c > schema.num_dense ? schema.multi_hot_sep : 0;
  for (const SparseColumn& s : schema.sparse) {
    if (s.column == c) return s.multi_hot_sep;
  }
  return 0;
}

// One JSON value as the text token of a column.
absl::StatusOr<std::string> Token(const json& v, char multi_sep, const std::string& name) {
  switch (v.type()) {
    case json::value_t::null:
      return std::string();
    case json::value_t::string:
      return v.get<std::string>();
    case json::value_t::boolean:
      return std::string(v.get<bool>() ? "1" : "0");
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();
    case json::value_t::array: {
      if (multi_sep == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("column \"", name, "\" holds one value, not a list"));
      }
      std::vector<std::string> parts;
      for (const json& e : v) {
        if (e.is_array() || e.is_object()) {
          return absl::InvalidArgumentError(absl::StrCat("column \"", name, "\": nested list"));
        }
        PS_ASSIGN_OR_RETURN(std::string t, Token(e, 0, name));
        if (t.find(multi_sep) != std::string::npos) {
          return absl::InvalidArgumentError(absl::StrCat(
              "column \"", name, "\": a value holds the multi-hot separator '", std::string(1, multi_sep), "'"));
        }
        parts.push_back(std::move(t));
      }
      return absl::StrJoin(parts, std::string(1, multi_sep));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("column \"", name, "\": an object"));
  }
}

}  // namespace

absl::StatusOr<RequestRows> RequestRows::Create(const Schema& schema) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<const Parser> parser, CreateParser(schema));
  RequestRows r(std::move(parser));
  r.num_columns_ = NumColumns(schema);
  r.label_column_ = schema.custom ? schema.label.column : 0;
  r.label_columns_ = {r.label_column_};
  for (const LabelColumn& l : schema.extra_labels) r.label_columns_.push_back(l.column);
  std::sort(r.label_columns_.begin(), r.label_columns_.end());
  r.names_.assign(r.num_columns_, "");
  if (schema.custom) {
    r.names_[schema.label.column] = schema.label.name;
    for (const DenseColumn& d : schema.dense) r.names_[d.column] = d.name;
    for (const SparseColumn& s : schema.sparse) r.names_[s.column] = s.name;
    for (size_t c = 0; c < schema.column_names.size() && c < r.names_.size(); ++c) {
      if (!schema.column_names[c].empty()) r.names_[c] = schema.column_names[c];
    }
    if (!schema.column_names.empty()) {
      r.header_ = absl::StrJoin(schema.column_names, std::string(1, schema.field_sep));
    }
  } else {
    r.names_[0] = "label";
    for (int j = 1; j <= schema.num_dense; ++j) r.names_[j] = absl::StrCat("I", j);
    for (int f = 1; f <= schema.num_sparse; ++f) r.names_[schema.num_dense + f] = absl::StrCat("C", f);
  }
  r.scored_with_.assign(r.num_columns_, "its missing-value id");
  if (schema.custom) {
    for (const DenseColumn& d : schema.dense) {
      r.scored_with_[d.column] =
          d.missing_given ? absl::StrCat("its missing value ", d.missing)
          : d.transform == Transform::kStandardize ? std::string("its training mean")
                                                   : std::string("0");
    }
  } else {
    for (int j = 1; j <= schema.num_dense; ++j) r.scored_with_[j] = "0";
  }
  return r;
}

RequestRows::RequestRows(std::unique_ptr<const Parser> parser) : parser_(std::move(parser)) {}

std::string RequestRows::TooFewHint(std::string_view line, size_t columns) const {
  const Schema& schema = parser_->schema();
  if (columns == 1) {
    if (const char sep = SniffSeparator(line, schema.field_sep, num_columns_); sep != 0) {
      return absl::StrCat(": the row seems to be separated by ", SeparatorName(sep),
                          ", the model reads ", SeparatorName(schema.field_sep));
    }
  }
  if (columns + 1 >= static_cast<size_t>(num_columns_)) return "";
  // The first column with no value, read with the label and without it.
  const auto name = [&](size_t c) {
    return names_[c].empty() ? absl::StrCat(c) : absl::StrCat("\"", names_[c], "\"");
  };
  const size_t with = columns;
  size_t without = columns;
  for (size_t c = 0, seen = 0; c < static_cast<size_t>(num_columns_); ++c) {
    if (std::find(label_columns_.begin(), label_columns_.end(), static_cast<int>(c)) != label_columns_.end()) {
      continue;
    }
    if (seen++ == columns) {
      without = c;
      break;
    }
  }
  if (with == without) return absl::StrCat(": no value for column ", name(with), " on");
  return absl::StrCat(": no value for column ", name(with), " on (", name(without),
                      label_columns_.size() > 1 ? " on, without the labels)" : " on, without the label)");
}

std::vector<std::string> RequestRows::Warnings(const Lacking& lacking, int rows) const {
  std::vector<std::string> out;
  for (int c = 0; c < num_columns_; ++c) {
    const int n = lacking.rows[c];
    if (n == 0) continue;
    out.push_back(absl::StrCat("column \"", names_[c], "\" is missing in ", n, " of ", rows,
                               rows == 1 ? " row" : " rows", ": scored with ", scored_with_[c]));
  }
  return out;
}

absl::Status RequestRows::AddLine(std::string_view line, int row, ParsedRow* parsed,
                                  std::string* with_label, BatchBuilder* builder,
                                  Lacking* lacking) const {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const char sep = parser_->schema().field_sep;
  std::vector<std::string_view>& cols = parsed->columns;
  SplitColumns(line, sep, &cols);
  std::string_view text = line;
  const int labels = static_cast<int>(label_columns_.size());
  if (static_cast<int>(cols.size()) == num_columns_ - labels) {
    // Without the labels: a 0 in the first label's place, nothing (no
    // label) in the others'. Inserted last first, so that the positions
    // before each insertion hold.
    with_label->assign(line);
    for (int k = labels; k-- > 0;) {
      const int column = label_columns_[k];
      const std::string fill = column == label_column_ ? "0" : "";
      const size_t reduced = static_cast<size_t>(column - k);  // its place among the row's columns
      if (reduced >= cols.size()) {
        with_label->insert(line.size(), std::string(1, sep) + fill);
      } else {
        size_t pos = static_cast<size_t>(cols[reduced].data() - line.data());
        if (pos > 0 && line[pos - 1] == '"') --pos;  // a quoted column
        with_label->insert(pos, fill + std::string(1, sep));
      }
    }
    text = *with_label;
  }
  if (absl::Status s = parser_->Parse(text, parsed); !s.ok()) {
    if (text == line && static_cast<int>(cols.size()) != num_columns_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", row, ": ", cols.size(), cols.size() == 1 ? " column" : " columns", ", want ",
          num_columns_, " (or ", num_columns_ - labels, labels > 1 ? " without the labels)" : " without the label)",
          TooFewHint(line, cols.size())));
    }
    return RowError(row, s);
  }
  if (!builder->Append(*parsed)) {
    return absl::InvalidArgumentError(absl::StrCat("row ", row, ": the request is too large"));
  }
  parser_->MissingColumns(text, &lacking->split, &lacking->columns);
  for (int c : lacking->columns) ++lacking->rows[c];
  return absl::OkStatus();
}

absl::StatusOr<RequestBatch> RequestRows::ParseText(std::string_view body, int max_rows) const {
  const Schema& schema = parser_->schema();
  BatchBuilder builder(schema.num_dense, schema.num_sparse);
  Lacking lacking;
  lacking.rows.assign(num_columns_, 0);
  ParsedRow parsed;
  std::string with_label;
  int row = 0;
  size_t begin = 0;
  while (begin < body.size()) {
    size_t end = body.find('\n', begin);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(begin, end - begin);
    begin = end + 1;
    std::string_view bare = line;
    if (!bare.empty() && bare.back() == '\r') bare.remove_suffix(1);
    if (bare.empty()) continue;
    if (row == 0 && !header_.empty() && bare == header_) continue;  // a header line
    if (++row > max_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", max_rows, " rows in one request (--max_request_rows)"));
    }
    PS_RETURN_IF_ERROR(AddLine(line, row, &parsed, &with_label, &builder, &lacking));
  }
  if (row == 0) return absl::InvalidArgumentError("no rows in the request");
  return RequestBatch{builder.Finish(), Warnings(lacking, row)};
}

absl::StatusOr<RequestBatch> RequestRows::ParseJson(std::string_view body, int max_rows) const {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("the request is not valid JSON");
  if (!doc.is_object() || (!doc.contains("rows") && !doc.contains("lines"))) {
    return absl::InvalidArgumentError(
        "the JSON request needs \"rows\" (a list of objects, one key per column) or \"lines\" "
        "(a list of rows as text)");
  }
  const Schema& schema = parser_->schema();
  BatchBuilder builder(schema.num_dense, schema.num_sparse);
  Lacking lacking;
  lacking.rows.assign(num_columns_, 0);
  ParsedRow parsed;
  std::string with_label;
  const bool lines = doc.contains("lines");
  const json& list = lines ? doc["lines"] : doc["rows"];
  if (!list.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", lines ? "lines" : "rows", "\" is not a list"));
  }
  if (list.empty()) return absl::InvalidArgumentError("no rows in the request");
  if (list.size() > static_cast<size_t>(max_rows)) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", max_rows,
                                                   " rows in one request (--max_request_rows)"));
  }
  const std::string sep(1, schema.field_sep);
  std::string line;
  int row = 0;
  for (const json& r : list) {
    ++row;
    if (lines) {
      if (!r.is_string()) return absl::InvalidArgumentError(absl::StrCat("row ", row, ": not a string"));
      const std::string& text = r.get_ref<const std::string&>();
      if (text.find('\n') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("row ", row, ": holds a line break"));
      }
      PS_RETURN_IF_ERROR(AddLine(text, row, &parsed, &with_label, &builder, &lacking));
      continue;
    }
    if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat("row ", row, ": not an object"));
    size_t known = 0;
    line.clear();
    for (int c = 0; c < num_columns_; ++c) {
      if (c > 0) line += sep;
      if (c == label_column_) {
        line += '0';
        if (r.contains(names_[c])) ++known;  // a label given is ignored
        continue;
      }
      if (names_[c].empty()) continue;
      auto it = r.find(names_[c]);
      if (it == r.end()) continue;
      ++known;
      absl::StatusOr<std::string> t = Token(*it, ColumnMultiHotSep(schema, c), names_[c]);
      if (!t.ok()) return RowError(row, t.status());
      if (t->find(schema.field_sep) != std::string::npos || t->find('\n') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("row ", row, ": column \"", names_[c],
                                                       "\" holds the field separator or a line break"));
      }
      line += *t;
    }
    if (known != r.size()) {
      for (const auto& [key, value] : r.items()) {
        if (std::find(names_.begin(), names_.end(), key) == names_.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "row ", row, ": unknown column \"", key, "\" (the model's columns: ",
              absl::StrJoin(names_, ", "), ")"));
        }
      }
    }
    PS_RETURN_IF_ERROR(AddLine(line, row, &parsed, &with_label, &builder, &lacking));
  }
  return RequestBatch{builder.Finish(), Warnings(lacking, row)};
}

}  // namespace pstrain::worker
