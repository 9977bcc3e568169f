#include "data/schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

std::string SepName(char c) {
  if (c == '\t') return "'\\t'";
  if (c == '\n') return "'\\n'";
  if (c == 0) return "none";
  return absl::StrCat("'", std::string(1, c), "'");
}

absl::Status ValidateColumns(const Schema& s) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("schema", s.source.empty() ? "" : " ",
                                                   s.source, ": ", parts...));
  };
  if (s.num_columns < 1 || s.num_columns > 65536) {
    return bad("num_columns ", s.num_columns, " outside [1, 65536]");
  }
  if (!s.column_names.empty() && static_cast<int>(s.column_names.size()) != s.num_columns) {
    return bad(s.column_names.size(), " column names for ", s.num_columns, " columns");
  }
  if (static_cast<int>(s.dense.size()) != s.num_dense ||
      static_cast<int>(s.sparse.size()) != s.num_sparse) {
    return bad("num_dense/num_sparse do not match the columns");
  }
  // A column has one role; a timestamp column may also give each part of
  // its time once as a dense and once as a categorical field.
  std::vector<int> used(s.num_columns, 0);
  std::set<std::tuple<int, TimePart, std::string>> parts;
  auto take = [&](int column, const std::string& role, TimePart part = TimePart::kNone) -> absl::Status {
    if (column < 0 || column >= s.num_columns) {
      return bad(role, ": column ", column, " outside [0, ", s.num_columns, ")");
    }
    if (part != TimePart::kNone) {
      if (!parts.emplace(column, part, role).second) {
        return bad(role, ": column ", ColumnName(s, column), "'s ", TimePartName(part),
                   " is used twice");
      }
      return absl::OkStatus();
    }
    if (used[column]++) return bad(role, ": column ", ColumnName(s, column), " is used twice");
    return absl::OkStatus();
  };
  PS_RETURN_IF_ERROR(take(s.label.column, "label"));
  for (const LabelColumn& l : s.extra_labels) {
    PS_RETURN_IF_ERROR(take(l.column, absl::StrCat("labels.", l.name)));
  }
  for (const DenseColumn& d : s.dense) {
    PS_RETURN_IF_ERROR(take(d.column, "dense", d.time));
    if (!(d.clip_lo <= d.clip_hi)) return bad("dense ", d.name, ": clip low above high");
    if (d.transform == Transform::kStandardize && d.has_stats &&
        !(d.stddev > 0 && std::isfinite(d.mean) && std::isfinite(d.stddev))) {
      return bad("dense ", d.name, ": standardize needs a finite mean and a stddev > 0");
    }
  }
  for (const SparseColumn& c : s.sparse) {
    PS_RETURN_IF_ERROR(take(c.column, "sparse", c.time));
    if (c.multi_hot_sep == '\n' || c.multi_hot_sep == '\r' ||
        (c.multi_hot_sep != 0 && c.multi_hot_sep == s.field_sep)) {
      return bad("sparse ", c.name, ": invalid multi_hot separator ", SepName(c.multi_hot_sep));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool AnyMultiHot(const Schema& schema) {
  if (!schema.custom) return schema.multi_hot_sep != 0;
  for (const SparseColumn& c : schema.sparse) {
    if (c.multi_hot_sep != 0) return true;
  }
  return false;
}

std::vector<std::string> LabelNames(const Schema& schema) {
  std::vector<std::string> names = {schema.label.name.empty() ? "label" : schema.label.name};
  for (const LabelColumn& l : schema.extra_labels) names.push_back(l.name);
  return names;
}

std::string ColumnName(const Schema& schema, int column) {
  if (column >= 0 && static_cast<size_t>(column) < schema.column_names.size()) {
    return absl::StrCat("\"", schema.column_names[column], "\"");
  }
  if (schema.custom) return absl::StrCat("column ", column);
  if (column == 0) return "label";
  if (column <= schema.num_dense) return absl::StrCat("I", column);
  return absl::StrCat("C", column - schema.num_dense);
}

float ApplyTransform(const DenseColumn& c, double x) {
  x = std::min(std::max(x, c.clip_lo), c.clip_hi);
  switch (c.transform) {
    case Transform::kNone:
      return static_cast<float>(x);
    case Transform::kLog1p:
      return static_cast<float>(x >= 0 ? std::log1p(x) : -std::log1p(-x));
    case Transform::kLog1pClamp:
      return static_cast<float>(x > 0 ? std::log1p(x) : 0.0);
    case Transform::kStandardize:
      return static_cast<float>((x - c.mean) / c.stddev);
  }
  return static_cast<float>(x);
}

float MissingValue(const DenseColumn& c) {
  if (c.missing_given) return ApplyTransform(c, c.missing);
  if (c.transform == Transform::kStandardize) return 0.0f;
  return ApplyTransform(c, 0.0);
}

absl::Status ValidateSchema(const Schema& schema) {
  if (schema.num_dense < 0 || schema.num_sparse < 0) {
    return absl::InvalidArgumentError(absl::StrCat("schema: negative field count (num_dense=",
                                                   schema.num_dense, ", num_sparse=",
                                                   schema.num_sparse, ")"));
  }
  if (schema.num_dense > 4096 || schema.num_sparse > 4096) {
    return absl::InvalidArgumentError("schema: more than 4096 dense or sparse fields");
  }
  if (schema.field_sep == '\n' || schema.field_sep == '\r' || schema.field_sep == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema: invalid field_sep ", SepName(schema.field_sep)));
  }
  if (schema.multi_hot_sep == '\n' || schema.multi_hot_sep == '\r' ||
      (schema.multi_hot_sep != 0 && schema.multi_hot_sep == schema.field_sep)) {
    return absl::InvalidArgumentError(absl::StrCat("schema: invalid multi_hot_sep ",
                                                   SepName(schema.multi_hot_sep),
                                                   " (field_sep ", SepName(schema.field_sep),
                                                   ")"));
  }
  if (schema.custom) PS_RETURN_IF_ERROR(ValidateColumns(schema));
  PS_RETURN_IF_ERROR(
      Annotate(ValidateMissingTokens(schema.missing_tokens, schema.field_sep), "schema"));
  if (schema.max_line_bytes < 16 || schema.max_line_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema: max_line_bytes ", schema.max_line_bytes,
                     " outside [16, 2^30]"));
  }
  return absl::OkStatus();
}

namespace internal {

// Filled at static initialization; nothing reads it before main.
const std::array<float, kLog1pTableSize> kLog1pTable = [] {
  std::array<float, kLog1pTableSize> t{};
  for (int i = 0; i < kLog1pTableSize; ++i) {
    t[i] = static_cast<float>(std::log1p(static_cast<double>(i)));
  }
  return t;
}();

float Log1pLarge(int64_t x) { return static_cast<float>(std::log1p(static_cast<double>(x))); }

}  // namespace internal

}  // namespace pstrain::worker
