// Sparse pull + push through the real stack: each iteration a worker pulls
// N ids drawn Zipf(A) over a large id space (duplicates included, as
// drawn), then pushes Adagrad gradients for the distinct ids among them (a
// worker pushes each row once). Ids are drawn up front, so the timed loop
// measures the stack, not the sampler; a warm-up pass creates the rows.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "bench/bench_cluster.h"
#include "bench/bench_util.h"

namespace pstrain::bench {

struct SparseBenchOptions {
  int ids = 100000;             // N, per pull
  uint32_t dim = 16;
  double zipf = 1.1;
  uint64_t id_space = 10000000;
  int batches = 16;             // distinct id batches cycled through
  double seconds = 3.0;
  uint64_t seed = 1;
  RowDtype dtype = RowDtype::kFloat32;                   // how the servers store values
  OptimizerKind optimizer = OptimizerKind::kAdagrad;
};

struct SparseBenchResult {
  int64_t iterations = 0;
  double pull_rows_per_sec = 0;         // ids requested (N) per second of pulling
  double push_rows_per_sec = 0;         // ids requested (N) per second of pushing
  double push_unique_rows_per_sec = 0;  // rows actually updated per second of pushing
  double unique_per_iteration = 0;      // mean distinct ids among the N
  double pull_p50_us = 0, push_p50_us = 0;
  uint64_t table_rows = 0;              // rows held by all servers
  double bytes_per_row = 0;             // servers' table memory / rows
  double value_bytes_per_row = 0;       // of which the values
  double state_bytes_per_row = 0;       // of which the optimizer state
  double index_bytes_per_row = 0;       // of which the id -> row index
  double scratch_bytes = 0;             // per-request buffers, all servers (not per row)
  double bytes_per_row_without_scratch = 0;
};

// The table the sparse bench uses: `dim` values per row, Adagrad unless
// told.
std::vector<TableSpec> SparseBenchTable(uint32_t dim, RowDtype dtype = RowDtype::kFloat32,
                                        OptimizerKind optimizer = OptimizerKind::kAdagrad);

absl::StatusOr<SparseBenchResult> RunSparseBench(BenchCluster& cluster,
                                                 const SparseBenchOptions& options);

}  // namespace pstrain::bench
