// Deterministic initial values for parameter tables.
//
// The value of an element is a pure function of (InitializerConfig::seed,
// table id, row, column) through Mix64, so a sparse row created lazily on
// any server, after any resharding or restart, starts with the same values,
// and a dense element does not depend on how the table is cut into shards.
// Sparse tables use (row = feature id, column = 0..dim-1); dense tables use
// (row = element index in the whole table, column = 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/table_spec.h"

namespace pstrain::optim {

// Immutable after Create(); safe to share between threads.
class Initializer {
 public:
  // InvalidArgument for an unknown kind, a non-finite scale, or a negative
  // scale for the uniform and normal kinds.
  static absl::StatusOr<Initializer> Create(const InitializerConfig& config, uint32_t table_id);

  const InitializerConfig& config() const { return config_; }

  // The value of one element.
  float Value(uint64_t row, uint32_t column) const;
  // out[c] = Value(row, c) for c in [0, dim).
  void FillRow(uint64_t row, float* out, size_t dim) const;
  // out[i] = Value(begin + i, 0) for i in [0, n): a range of a dense table.
  void FillRange(uint64_t begin, float* out, size_t n) const;

 private:
  Initializer(const InitializerConfig& config, uint32_t table_id);

  uint64_t RowKey(uint64_t row) const;

  InitializerConfig config_;
  uint64_t table_key_;  // Mix64 of (seed, table id)
};

}  // namespace pstrain::optim
