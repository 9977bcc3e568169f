#include "data/delimited_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "data/label_rule.h"
#include "data/separator_sniff.h"

namespace pstrain::worker {
namespace {

constexpr size_t kSnippetBytes = 48;
constexpr double kInf = std::numeric_limits<double>::infinity();

// A short, printable excerpt of untrusted bytes for error messages.
std::string Snippet(std::string_view s) {
  bool cut = s.size() > kSnippetBytes;
  std::string out = absl::CHexEscape(absl::string_view(s.data(), cut ? kSnippetBytes : s.size()));
  if (cut) out += "...";
  return out;
}

// Finds the end of the token starting at `p`: the next separator, or `end`.
inline const char* TokenEnd(const char* p, const char* end, char sep) {
  if (p >= end) return end;
  const void* hit = std::memchr(p, sep, static_cast<size_t>(end - p));
  return hit == nullptr ? end : static_cast<const char*>(hit);
}

std::string_view StripQuotes(std::string_view t) {
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') return t.substr(1, t.size() - 2);
  return t;
}

}  // namespace

void SplitColumns(std::string_view line, char sep, std::vector<std::string_view>* columns) {
  columns->clear();
  const char* p = line.data();
  const char* const end = p + line.size();
  while (true) {
    const char* e;
    if (p < end && *p == '"') {
      // A quoted column: to the closing quote that is not doubled.
      const char* q = p + 1;
      while (q < end) {
        const void* hit = std::memchr(q, '"', static_cast<size_t>(end - q));
        if (hit == nullptr) {
          q = end;
          break;
        }
        q = static_cast<const char*>(hit);
        if (q + 1 < end && q[1] == '"') {
          q += 2;
          continue;
        }
        break;
      }
      e = TokenEnd(q, end, sep);
      columns->push_back(StripQuotes(std::string_view(p, e - p)));
    } else {
      e = TokenEnd(p, end, sep);
      columns->emplace_back(p, e - p);
    }
    if (e == end) return;
    p = e + 1;
  }
}

bool ParseNumber(std::string_view token, double missing, double* out) {
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) {
    *out = missing;
    return true;
  }
  const char* p = token.data();
  const char* end = p + token.size();
  if (*p == '+') ++p;
  auto [rest, ec] = std::from_chars(p, end, *out);
  return ec == std::errc() && rest == end && std::isfinite(*out);
}

bool ParseInt64(std::string_view token, int64_t* out) {
  const char* p = token.data();
  const char* end = p + token.size();
  if (p == end) {
    *out = 0;
    return true;
  }
  bool negative = false;
  if (*p == '-' || *p == '+') {
    negative = *p == '-';
    ++p;
  }
  size_t digits = static_cast<size_t>(end - p);
  if (digits == 0 || digits > 18) return false;
  uint64_t v = 0;
  for (; p < end; ++p) {
    unsigned d = static_cast<unsigned char>(*p) - static_cast<unsigned>('0');
    if (d > 9) return false;
    v = v * 10 + d;
  }
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

absl::StatusOr<DelimitedParser> DelimitedParser::Create(const Schema& schema) {
  absl::Status s = ValidateSchema(schema);
  if (!s.ok()) return s;
  return DelimitedParser(schema);
}

absl::Status DelimitedParser::ColumnCountError(std::string_view line) const {
  size_t columns = 1;
  for (char c : line) columns += (c == schema_.field_sep);
  return absl::InvalidArgumentError(ColumnCountReason(schema_, line, columns));
}

absl::Status DelimitedParser::CheckHeader(std::string_view line) const {
  if (schema_.column_names.empty()) return absl::OkStatus();
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> names;
  SplitColumns(line, schema_.field_sep, &names);
  const size_t want = static_cast<size_t>(NumFileColumns(schema_));  // no partition columns
  std::string hint;  // one column where the schema has more: another separator?
  if (names.size() == 1 && want > 1) {
    if (const char sep = SniffSeparator(line, schema_.field_sep, want); sep != 0) {
      hint = absl::StrCat("; the file seems to be separated by ", SeparatorName(sep), " (",
                          SeparatorAdvice(schema_, sep), ")");
    }
  }
  for (size_t c = 0; c < std::min(names.size(), want); ++c) {
    if (names[c] != schema_.column_names[c]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the header's column ", c, " is \"", Snippet(names[c]), "\", the schema's is \"",
          schema_.column_names[c], "\"", hint));
    }
  }
  if (names.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("the header has ", names.size(),
                                                   " columns, the schema ", want, hint));
  }
  return absl::OkStatus();
}

DelimitedParser::DelimitedParser(const Schema& schema)
    : schema_(schema), missing_(schema.missing_tokens) {
  if (!schema_.custom) return;
  roles_.assign(schema_.num_columns, Role{Role::kIgnore});
  roles_[schema_.label.column] =
      Role{Role::kLabel, schema_.label.op == LabelColumn::Op::kBinary};
  for (size_t k = 0; k < schema_.extra_labels.size(); ++k) {
    roles_[schema_.extra_labels[k].column] = Role{Role::kExtraLabel, false, static_cast<uint32_t>(k)};
  }
  for (int j = 0; j < schema_.num_dense; ++j) {
    const DenseColumn& d = schema_.dense[j];
    IntegerPath path = IntegerPath::kNone;
    if (d.clip_lo == -kInf && d.clip_hi == kInf) {
      path = d.transform == Transform::kLog1pClamp ? IntegerPath::kLog1pClamp
             : d.transform == Transform::kLog1p    ? IntegerPath::kLog1p
                                                   : IntegerPath::kOther;
    }
    if (d.time != TimePart::kNone) {
      time_dense_.push_back(j);
    } else {
      roles_[d.column] = Role{Role::kDense, path == IntegerPath::kLog1pClamp, static_cast<uint32_t>(j)};
    }
    integer_path_.push_back(path);
    missing_value_.push_back(MissingValue(d));
  }
  // One pass over the line appends the ids in field order when the fields'
  // columns come in that order.
  sparse_in_order_ = true;
  for (int f = 0; f < schema_.num_sparse; ++f) {
    const SparseColumn& c = schema_.sparse[f];
    if (c.time != TimePart::kNone) {
      sparse_in_order_ = false;
      continue;
    }
    roles_[c.column] = Role{Role::kSparse, c.multi_hot_sep == 0, static_cast<uint32_t>(f),
                            c.hash_buckets, static_cast<uint32_t>(HashField(c, f))};
    if (f > 0 && schema_.sparse[f].column < schema_.sparse[f - 1].column) sparse_in_order_ = false;
  }
  if (!time_dense_.empty()) sparse_in_order_ = false;
}

absl::Status DelimitedParser::CustomColumnCountError(std::string_view line, size_t columns) const {
  return absl::InvalidArgumentError(ColumnCountReason(schema_, line, columns));
}

inline absl::Status DelimitedParser::CustomLabel(std::string_view t, ParsedRow* row) const {
  const LabelColumn& label = schema_.label;
  if (label.op == LabelColumn::Op::kBinary && t.size() == 1 && (t[0] == '0' || t[0] == '1')) {
    row->label = t[0] == '1' ? 1.0f : 0.0f;
    return absl::OkStatus();
  }
  double v;
  if (t.empty() || !ParseNumber(t, 0, &v) || !ApplyLabelRule(label, v, &row->label)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label column ", ColumnName(schema_, label.column),
        label.op == LabelColumn::Op::kBinary ? ": not 0 or 1: \"" : ": not a number: \"",
        Snippet(t), "\""));
  }
  return absl::OkStatus();
}

absl::Status DelimitedParser::CustomExtraLabel(int k, std::string_view t, ParsedRow* row) const {
  const LabelColumn& label = schema_.extra_labels[k];
  float& out = row->extra_labels[k];
  if (t.empty() || missing_.Contains(t)) {
    out = std::numeric_limits<float>::quiet_NaN();
    return absl::OkStatus();
  }
  double v;
  if (!ParseNumber(t, 0, &v) || !ApplyLabelRule(label, v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label \"", label.name, "\" (column ", ColumnName(schema_, label.column),
        label.op == LabelColumn::Op::kBinary ? "): not 0 or 1 or empty: \"" : "): not a number: \"",
        Snippet(t), "\""));
  }
  return absl::OkStatus();
}

inline absl::Status DelimitedParser::CustomDense(int j, std::string_view t, ParsedRow* row) const {
  const DenseColumn& d = schema_.dense[j];
  int64_t iv;
  if (t.empty()) {
    row->dense[j] = missing_value_[j];
    return absl::OkStatus();
  }
  const IntegerPath path = integer_path_[j];
  if (path != IntegerPath::kNone && ParseInt64(t, &iv)) {
    // An integer, the common case: log1p from the table of the Criteo
    // layout (the same float as the general path).
    switch (path) {
      case IntegerPath::kLog1pClamp:
        row->dense[j] = DenseTransform(iv);
        return absl::OkStatus();
      case IntegerPath::kLog1p:
        row->dense[j] = iv >= 0 ? DenseTransform(iv) : -DenseTransform(-iv);
        return absl::OkStatus();
      default:
        row->dense[j] = ApplyTransform(d, static_cast<double>(iv));
        return absl::OkStatus();
    }
  }
  double v;
  if (missing_.Contains(t)) {
    row->dense[j] = missing_value_[j];
    return absl::OkStatus();
  }
  // NaN for a field of spaces (too many for Contains): missing too.
  if (!ParseNumber(t, std::numeric_limits<double>::quiet_NaN(), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("column ", ColumnName(schema_, d.column),
                                                   ": not a number: \"", Snippet(t), "\""));
  }
  row->dense[j] = std::isnan(v) ? missing_value_[j] : ApplyTransform(d, v);
  return absl::OkStatus();
}

void DelimitedParser::AppendIds(int f, std::string_view t, uint64_t buckets, char multi_hot_sep,
                             ParsedRow* row) const {
  if (multi_hot_sep == 0) {
    row->ids.push_back(FeatureId(f, missing_.Contains(t) ? std::string_view() : t, buckets));
    return;
  }
  const size_t before = row->ids.size();
  const char* const e = t.data() + t.size();
  for (const char* q = t.data(); q < e;) {
    const char* qe = TokenEnd(q, e, multi_hot_sep);
    const std::string_view token(q, qe - q);
    if (!missing_.Contains(token)) row->ids.push_back(FeatureId(f, token, buckets));
    q = qe + 1;
  }
  if (row->ids.size() == before) row->ids.push_back(MissingId(f, buckets));
}

inline void DelimitedParser::CustomSparse(int f, std::string_view t, ParsedRow* row) const {
  const SparseColumn& c = schema_.sparse[f];
  const size_t before = row->ids.size();
  AppendIds(HashField(c, f), t, c.hash_buckets, c.multi_hot_sep, row);
  if (c.max_length > 0 && row->ids.size() - before > static_cast<size_t>(c.max_length)) {
    // Keep the last max_length ids: the most recent of a history.
    const size_t drop = row->ids.size() - before - c.max_length;
    row->ids.erase(row->ids.begin() + before, row->ids.begin() + before + drop);
  }
  row->field_end[f] = static_cast<uint32_t>(row->ids.size());
}

absl::Status DelimitedParser::TimeDense(int j, std::string_view t, ParsedRow* row) const {
  const DenseColumn& d = schema_.dense[j];
  int64_t seconds;
  if (missing_.Contains(t)) {
    row->dense[j] = missing_value_[j];
  } else if (ParseTimestamp(t, &seconds)) {
    row->dense[j] = ApplyTransform(d, TimePartOf(seconds, d.time));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("column ", ColumnName(schema_, d.column),
                                                   ": not a timestamp: \"", Snippet(t), "\""));
  }
  return absl::OkStatus();
}

absl::Status DelimitedParser::TimeSparse(int f, std::string_view t, ParsedRow* row) const {
  const SparseColumn& c = schema_.sparse[f];
  const int field = HashField(c, f);
  int64_t seconds;
  if (missing_.Contains(t)) {
    row->ids.push_back(MissingId(field, c.hash_buckets));
  } else if (ParseTimestamp(t, &seconds)) {
    char buf[8];
    const auto end = std::to_chars(buf, buf + sizeof(buf), TimePartOf(seconds, c.time)).ptr;
    row->ids.push_back(FeatureId(field, std::string_view(buf, end - buf), c.hash_buckets));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("column ", ColumnName(schema_, c.column),
                                                   ": not a timestamp: \"", Snippet(t), "\""));
  }
  row->field_end[f] = static_cast<uint32_t>(row->ids.size());
  return absl::OkStatus();
}

inline bool DelimitedParser::FastColumn(const Role& role, std::string_view t, ParsedRow* row) const {
  if (!role.fast) return false;
  switch (role.kind) {
    case Role::kSparse:
      row->ids.push_back(FeatureId(static_cast<int>(role.hash_field),
                                   missing_.Contains(t) ? std::string_view() : t, role.buckets));
      row->field_end[role.index] = static_cast<uint32_t>(row->ids.size());
      return true;
    case Role::kDense: {
      int64_t v;
      if (t.empty() || !ParseInt64(t, &v)) return false;
      row->dense[role.index] = DenseTransform(v);
      return true;
    }
    case Role::kLabel:
      if (t.size() != 1 || (t[0] != '0' && t[0] != '1')) return false;
      row->label = t[0] == '1' ? 1.0f : 0.0f;
      return true;
    case Role::kIgnore:
      return true;
    case Role::kExtraLabel:
      return false;
  }
  return false;
}

inline absl::Status DelimitedParser::CustomColumn(int column, std::string_view t, ParsedRow* row) const {
  const Role role = roles_[column];
  switch (role.kind) {
    case Role::kLabel:
      return CustomLabel(t, row);
    case Role::kExtraLabel:
      return CustomExtraLabel(static_cast<int>(role.index), t, row);
    case Role::kDense:
      return CustomDense(static_cast<int>(role.index), t, row);
    case Role::kSparse:
      CustomSparse(static_cast<int>(role.index), t, row);
      return absl::OkStatus();
    case Role::kIgnore:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status DelimitedParser::ParseCustom(std::string_view line, ParsedRow* row) const {
  row->dense.resize(schema_.num_dense);
  row->extra_labels.resize(schema_.extra_labels.size());
  row->ids.clear();
  row->field_end.resize(schema_.num_sparse);
  const char sep = schema_.field_sep;
  const size_t num_columns = roles_.size();
  // A file's rows lack the partition columns: their values come with the row.
  const bool from_file = row->partition != nullptr && !schema_.partition_columns.empty();
  if (sparse_in_order_ && !from_file) {
    // One pass, column after column, while no column is quoted.
    const char* p = line.data();
    const char* const end = p + line.size();
    for (size_t c = 0;; ++c) {
      if (p < end && *p == '"') break;  // the general path below
      const char* e = TokenEnd(p, end, sep);
      if (c >= num_columns) {
        size_t columns = c + 1;
        for (const char* q = e; q < end; ++q) columns += (*q == sep);
        return CustomColumnCountError(line, columns);
      }
      const std::string_view t(p, e - p);
      if (!FastColumn(roles_[c], t, row)) {
        PS_RETURN_IF_ERROR(CustomColumn(static_cast<int>(c), t, row));
      }
      if (e == end) {
        if (c + 1 != num_columns) return CustomColumnCountError(line, c + 1);
        return absl::OkStatus();
      }
      p = e + 1;
    }
    row->ids.clear();
  }
  // Quoted columns, or fields out of column order: split first.
  std::vector<std::string_view>& cols = row->columns;
  SplitColumns(line, sep, &cols);
  if (from_file) {
    if (cols.size() != num_columns - schema_.partition_columns.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          cols.size(), cols.size() == 1 ? " field" : " fields", ", the schema expects ",
          num_columns - schema_.partition_columns.size(), " besides the partition columns (",
          absl::StrJoin(schema_.partition_columns, ", "), ") its folders give"));
    }
    for (const std::string& v : *row->partition) cols.push_back(v);
  }
  if (cols.size() != num_columns) return CustomColumnCountError(line, cols.size());
  for (size_t c = 0; c < num_columns; ++c) {
    if (roles_[c].kind != Role::kSparse) {
      PS_RETURN_IF_ERROR(CustomColumn(static_cast<int>(c), cols[c], row));
    }
  }
  for (int j : time_dense_) PS_RETURN_IF_ERROR(TimeDense(j, cols[schema_.dense[j].column], row));
  for (int f = 0; f < schema_.num_sparse; ++f) {
    const SparseColumn& c = schema_.sparse[f];
    if (c.time != TimePart::kNone) {
      PS_RETURN_IF_ERROR(TimeSparse(f, cols[c.column], row));
    } else {
      CustomSparse(f, cols[c.column], row);
    }
  }
  return absl::OkStatus();
}

void DelimitedParser::MissingColumns(std::string_view line, std::vector<std::string_view>* scratch,
                                  std::vector<int>* columns) const {
  columns->clear();
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  SplitColumns(line, schema_.field_sep, scratch);
  auto missing = [&](std::string_view t, char multi_hot_sep) {
    if (multi_hot_sep == 0) return missing_.Contains(t);
    const char* const e = t.data() + t.size();
    for (const char* q = t.data(); q < e;) {
      const char* qe = TokenEnd(q, e, multi_hot_sep);
      if (!missing_.Contains(std::string_view(q, qe - q))) return false;
      q = qe + 1;
    }
    return true;
  };
  const int n = std::min(static_cast<int>(scratch->size()), NumColumns(schema_));
  for (int c = 0; c < n; ++c) {
    char multi_hot_sep = 0;
    if (schema_.custom) {
      const Role& role = roles_[c];
      if (role.kind != Role::kDense && role.kind != Role::kSparse) continue;
      if (role.kind == Role::kSparse) multi_hot_sep = schema_.sparse[role.index].multi_hot_sep;
    } else {
      if (c == 0) continue;  // the label
      if (c > schema_.num_dense) multi_hot_sep = schema_.multi_hot_sep;
    }
    if (missing((*scratch)[c], multi_hot_sep)) columns->push_back(c);
  }
}

absl::Status DelimitedParser::Parse(std::string_view line, ParsedRow* row) const {
  if (line.size() > schema_.max_line_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("line of ", line.size(),
                                                   " bytes exceeds max_line_bytes ",
                                                   schema_.max_line_bytes));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (schema_.custom) return ParseCustom(line, row);
  const char sep = schema_.field_sep;
  const int num_dense = schema_.num_dense;
  const int num_sparse = schema_.num_sparse;
  const int last_column = num_dense + num_sparse;
  const char* p = line.data();
  const char* const end = p + line.size();

  // Returns the end of column `c` starting at p; nullptr when the line has
  // too few (or, for the last column, too many) separators.
  auto column_end = [&](int c) -> const char* {
    const char* e = TokenEnd(p, end, sep);
    if (c < last_column) return e == end ? nullptr : e;
    return e == end ? e : nullptr;
  };

  // Label.
  const char* e = column_end(0);
  if (e == nullptr) return ColumnCountError(line);
  if (e - p != 1 || (*p != '0' && *p != '1')) {
    return absl::InvalidArgumentError(
        absl::StrCat("label must be 0 or 1, got \"", Snippet(std::string_view(p, e - p)), "\""));
  }
  row->label = *p == '1' ? 1.0f : 0.0f;
  p = e + (e < end);

  row->dense.resize(num_dense);
  for (int j = 0; j < num_dense; ++j) {
    e = column_end(1 + j);
    if (e == nullptr) return ColumnCountError(line);
    int64_t v;
    const std::string_view t(p, e - p);
    if (ParseInt64(t, &v)) {
      row->dense[j] = DenseTransform(v);
    } else if (missing_.Contains(t)) {
      row->dense[j] = 0.0f;  // log(1 + 0)
    } else {
      return absl::InvalidArgumentError(absl::StrCat("column ", ColumnName(schema_, 1 + j),
                                                     ": not an integer: \"", Snippet(t), "\""));
    }
    p = e + (e < end);
  }

  row->ids.clear();
  row->field_end.resize(num_sparse);
  const uint64_t buckets = schema_.hash_buckets;
  const char multi = schema_.multi_hot_sep;
  for (int f = 0; f < num_sparse; ++f) {
    e = column_end(1 + num_dense + f);
    if (e == nullptr) return ColumnCountError(line);
    const std::string_view t(p, e - p);
    if (multi == 0) {  // the common case, inline
      row->ids.push_back(FeatureId(f, missing_.Contains(t) ? std::string_view() : t, buckets));
    } else {
      AppendIds(f, t, buckets, multi, row);
    }
    row->field_end[f] = static_cast<uint32_t>(row->ids.size());
    p = e + (e < end);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
