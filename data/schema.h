// Schema: the layout of a delimited text line and the mapping from a
// categorical token to a 64-bit feature id. Either the Criteo layout (label,
// dense integers, categorical tokens; --format=criteo, the default) or any
// table of columns described by a schema file (schema_file.h): the label,
// dense columns with a transform each, categorical columns with their own
// hash size, multi-hot separator and pooling. Plain data; the free functions
// are pure and thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/hash.h"
#include "data/missing_values.h"
#include "data/time_parts.h"

namespace pstrain::worker {

// What a dense column's value goes through, after the optional clip.
enum class Transform : uint8_t {
  kNone,         // x
  kLog1p,        // sign(x) * log(1 + |x|): negatives stay negative
  kLog1pClamp,   // log(1 + max(x, 0)): negatives become 0 (--format=criteo)
  kStandardize,  // (x - mean) / stddev
};

enum class BagPooling : uint8_t { kSum, kMean };

// The label of a row: the column's value as 0/1 (kBinary), or whether the
// value compares with `threshold` (e.g. delay > 15).
struct LabelColumn {
  enum class Op : uint8_t { kBinary, kGt, kGe, kLt, kLe, kEq, kNe };
  std::string name;
  int column = 0;
  Op op = Op::kBinary;
  double threshold = 0;
};

struct DenseColumn {
  std::string name;
  int column = 0;
  Transform transform = Transform::kNone;
  // Applied before the transform (and before the statistics are taken).
  double clip_lo = -std::numeric_limits<double>::infinity();
  double clip_hi = std::numeric_limits<double>::infinity();
  double mean = 0, stddev = 1;  // kStandardize: given, or from a first pass
  bool has_stats = false;       // kStandardize: mean and stddev are known
  // The raw value of a missing field (missing_values.h) when the schema
  // gives one (`missing_given`); else MissingValue()'s default.
  double missing = 0;
  bool missing_given = false;
  // A part of the column's timestamp (time_parts.h) instead of its value.
  TimePart time = TimePart::kNone;
};

struct SparseColumn {
  std::string name;
  int column = 0;
  uint64_t hash_buckets = 0;  // 0: full 64-bit ids; N > 0: ids in [0, N)
  char multi_hot_sep = 0;     // 0: one token
  BagPooling pooling = BagPooling::kSum;
  int embedding_dim = 0;      // 0: the model's --embedding_dim
  // The field whose ids this column's tokens take (-1: its own). A column
  // "ids_like" another hashes its tokens as that one does, so that a token
  // (an item) has one id, and one embedding row of a shared table, in both
  // (a history of items and the candidate item).
  int ids_of = -1;
  // A multi-hot column keeps at most this many ids of a row, its last ones
  // (the most recent of a history written oldest first); 0: every id.
  int max_length = 0;
  // A part of the column's timestamp (time_parts.h), whose decimal text is
  // the token, instead of the column's text.
  TimePart time = TimePart::kNone;
};

// The field whose hash a sparse column's tokens take (ids_of, or its own).
inline int HashField(const SparseColumn& c, int field) { return c.ids_of >= 0 ? c.ids_of : field; }

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
  // Besides the empty field, the tokens that mean "no value" in a dense or
  // categorical field (missing_values.h). A model saved before they existed
  // reads with none.
  std::vector<std::string> missing_tokens = DefaultMissingTokens();
  // The first line of every file is a header: skipped, and when
  // column_names are known, checked against them (a mismatch is an error).
  bool header = false;

  // false: the Criteo layout above (label, num_dense integer columns,
  // num_sparse tokens). true: the columns below, from a schema file
  // (schema_file.h); num_dense/num_sparse are then dense.size()/sparse.size()
  // and field_sep, max_line_bytes and header still apply.
  bool custom = false;
  // The data is Parquet ("format": "parquet", or the first file's magic):
  // columns are found by name in each file (parquet_rows.h).
  bool parquet = false;
  int num_columns = 0;                    // columns per line
  std::vector<std::string> column_names;  // [num_columns], or empty
  // Hive-style partition keys (the schema's "partition_columns"): columns
  // whose value is a file's folder name KEY=VALUE, the last columns of
  // num_columns and column_names, after the file's own (partition_values in
  // file_set.h). A file holds num_columns - partition_columns.size() columns.
  std::vector<std::string> partition_columns;
  LabelColumn label;
  // More labels, by name (the schema's "labels"), for the heads of a
  // multi-task model: a row whose field is empty or a missing token has no
  // such label (NaN in Batch::extra_labels: masked out of its head's loss
  // and metrics). The first label, `label`, is every row's.
  std::vector<LabelColumn> extra_labels;
  std::vector<DenseColumn> dense;    // in model order
  std::vector<SparseColumn> sparse;  // in model order (embedding tables C1, C2...)
  std::string source;                // the schema file, for messages
};

// OK when the schema can be parsed with; InvalidArgument naming the bad
// setting otherwise (negative counts, separators that collide or are '\n').
absl::Status ValidateSchema(const Schema& schema);

// Number of columns of a line.
inline int NumColumns(const Schema& schema) {
  return schema.custom ? schema.num_columns : 1 + schema.num_dense + schema.num_sparse;
}

// Number of columns a file holds (without the partition columns).
inline int NumFileColumns(const Schema& schema) {
  return NumColumns(schema) - static_cast<int>(schema.partition_columns.size());
}

// The hash buckets and multi-hot separator of sparse field `f`.
inline uint64_t FieldBuckets(const Schema& schema, int f) {
  return schema.custom ? schema.sparse[f].hash_buckets : schema.hash_buckets;
}
inline char FieldMultiHotSep(const Schema& schema, int f) {
  return schema.custom ? schema.sparse[f].multi_hot_sep : schema.multi_hot_sep;
}
// Whether some sparse field may hold more than one id per row.
bool AnyMultiHot(const Schema& schema);

// The labels' names: the first label's (its column's name), then each of
// extra_labels' (their names in the schema's "labels").
std::vector<std::string> LabelNames(const Schema& schema);

// The name of column `column` of a line (the header's, or "label", "I3",
// "C12" in the Criteo layout, or "column 7").
std::string ColumnName(const Schema& schema, int column);

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

// The dense transform of the Criteo layout, applied to every integer
// column: log(1 + max(x, 0)).
// Exact (same float as std::log1p of the double), table-driven for small x.
namespace internal {
inline constexpr int kLog1pTableSize = 4096;
extern const std::array<float, kLog1pTableSize> kLog1pTable;  // log1p(i)
float Log1pLarge(int64_t x);
}  // namespace internal
inline float DenseTransform(int64_t x) {
  if (x <= 0) return 0.0f;
  if (x < internal::kLog1pTableSize) return internal::kLog1pTable[static_cast<size_t>(x)];
  return internal::Log1pLarge(x);
}

// Column `c`'s transform of the value `x` (clip, then the transform).
float ApplyTransform(const DenseColumn& c, double x);

// The value column `c` takes for a missing field, transformed: its
// `missing` when given; else 0 for a standardized column (its training
// mean); else the transform of 0.
float MissingValue(const DenseColumn& c);

}  // namespace pstrain::worker
