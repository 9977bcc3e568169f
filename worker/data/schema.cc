#include "worker/data/schema.h"

#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr int kTableSize = 4096;

const std::array<float, kTableSize>& Log1pTable() {
  static const std::array<float, kTableSize> table = [] {
    std::array<float, kTableSize> t{};
    for (int i = 0; i < kTableSize; ++i) {
      t[i] = static_cast<float>(std::log1p(static_cast<double>(i)));
    }
    return t;
  }();
  return table;
}

std::string SepName(char c) {
  if (c == '\t') return "'\\t'";
  if (c == '\n') return "'\\n'";
  if (c == 0) return "none";
  return absl::StrCat("'", std::string(1, c), "'");
}

}  // namespace

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
  if (schema.max_line_bytes < 16 || schema.max_line_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema: max_line_bytes ", schema.max_line_bytes,
                     " outside [16, 2^30]"));
  }
  return absl::OkStatus();
}

float DenseTransform(int64_t x) {
  if (x <= 0) return 0.0f;
  if (x < kTableSize) return Log1pTable()[x];
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

}  // namespace pstrain::worker
