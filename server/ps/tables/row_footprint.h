// RowFootprint: the RAM one row of a SparseTable takes, from the layout the
// table itself uses (row_layout.h: values, optimizer state, Adam's step
// count, eviction metadata; row_store.h: in 2 MiB arena chunks, plus an
// index slot). RowLayout sizes its rows with RowStrideFloats; `pstrain plan
// --server_memory` sizes servers with RowFootprintOf, and
// tests/server/ps/row_footprint_test.cc holds it against real tables.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"
#include "common/table_spec.h"
#include "server/ps/tables/page_buffer.h"

namespace pstrain::server {

struct RowFootprint {
  size_t stride_floats = 0;  // the row in the arena
  double value_bytes = 0;    // dim values: 4 bytes each, 2 for fp16/bf16 (an odd dim padded)
  double state_bytes = 0;    // the optimizer's state, and Adam's step count
  double meta_bytes = 0;     // with eviction or a disk tier: update clock and push count
  double slack_bytes = 0;    // the row's share of its 2 MiB chunk's unused tail
  double index_bytes = 0;    // its id -> row slot, at the index's lowest load (RowIndex)
  double total() const {
    return value_bytes + state_bytes + meta_bytes + slack_bytes + index_bytes;
  }
};

// What a table's shard takes beside its rows: its last arena chunk, partly
// filled (up to 2 MiB), the index array's rounding to huge pages (up to 2
// MiB) and a request's working buffers (0.8 MiB for 4096 ids of dim 16).
inline constexpr double kShardFixedBytes = 3.0 * PageBuffer::kHugePage;

// Floats of one row of `spec` stored with `optimizer` (built from
// spec.optimizer); `tiered`: with eviction or a disk tier.
size_t RowStrideFloats(const TableSpec& spec, const optim::Optimizer& optimizer, bool tiered);

// The footprint of a row of sparse table `spec` in a large shard.
// InvalidArgument for a table that is not sparse or an optimizer config
// that Optimizer::Create refuses.
absl::StatusOr<RowFootprint> RowFootprintOf(const TableSpec& spec, bool tiered);

}  // namespace pstrain::server
