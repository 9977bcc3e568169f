// Schema: the layout of a delimited text line (Criteo-style: label, dense
// integers, categorical tokens) and the mapping from a categorical token to a
// 64-bit feature id. Plain data; the free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "common/hash.h"

namespace pstrain::worker {

struct Schema {
  int num_dense = 13;   // integer columns after the label
  int num_sparse = 26;  // categorical columns after the integers
  char field_sep = '\t';
  // 0: one token per categorical field. Otherwise the separator of a
  // multi-hot field (e.g. ',' or '|'): "a|b|c" gives three ids.
  char multi_hot_sep = 0;
  // 0: ids are the full 64-bit hashes. N > 0: ids are folded into [0, N).
  uint64_t hash_buckets = 0;
  // Longer lines are bad lines (InvalidArgument), never buffered whole.
  size_t max_line_bytes = size_t{1} << 20;
};

// OK when the schema can be parsed with; InvalidArgument naming the bad
// setting otherwise (negative counts, separators that collide or are '\n').
absl::Status ValidateSchema(const Schema& schema);

// Number of tab-separated columns of a line: label + dense + sparse.
inline int NumColumns(const Schema& schema) {
  return 1 + schema.num_dense + schema.num_sparse;
}

// Seed of the hash of categorical field `field` (0-based among the sparse
// fields). Distinct per field, so equal tokens in two fields get two ids.
inline uint64_t FieldSeed(int field) {
  return Mix64(0x7073747261696e00ULL + static_cast<uint64_t>(field));
}

// The feature id of `token` in categorical field `field`. An empty token is
// the field's "missing" id. With hash_buckets = N > 0 the id lies in [0, N).
inline uint64_t FeatureId(int field, std::string_view token, uint64_t hash_buckets) {
  uint64_t id = HashBytes(token, FieldSeed(field));
  return hash_buckets == 0 ? id : Mix64(id) % hash_buckets;
}

// The id that an empty token gets in `field`.
inline uint64_t MissingId(int field, uint64_t hash_buckets) {
  return FeatureId(field, std::string_view(), hash_buckets);
}

// The dense transform applied to every integer column: log(1 + max(x, 0)).
// Exact (same float as std::log1p of the double), table-driven for small x.
float DenseTransform(int64_t x);

}  // namespace pstrain::worker
