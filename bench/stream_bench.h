// The sparse stream bench (`pstrain_bench sparse_stream`): a stream of ids
// that never repeats, mixed with a Zipf hot set, pulled and pushed through
// one in-process server, as a continuous job sees its id space grow. Run
// twice in one process: with --max_rows (eviction) and unbounded. Prints
// the process's resident memory and the table's rows over time, one JSON
// line per sample, then a summary line per run: whether the resident
// memory stayed under --rss_budget_mb for the whole run. The unbounded run
// stops once it is past twice the budget (it has made its point, and the
// machine's memory is not the bench's to fill).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "bench/bench_cluster.h"

namespace pstrain::bench {

struct StreamBenchOptions {
  uint64_t distinct_ids = 50'000'000;  // fresh ids in the stream
  int ids = 65536;                     // ids per pull, of which...
  double fresh_fraction = 0.5;         // ...this share fresh, the rest hot
  uint64_t hot_ids = 1'000'000;        // the hot set, drawn Zipf(zipf)
  double zipf = 1.1;
  uint32_t dim = 16;
  RowDtype dtype = RowDtype::kFloat32;
  uint64_t max_rows = 2'000'000;       // the bounded run's --max_rows
  std::string policy = "lru";          // lru | lfu
  uint64_t rss_budget_bytes = uint64_t{1} << 30;
  double sample_seconds = 1.0;
  bool unbounded = true;               // also run without eviction
};

absl::Status RunStreamBench(const StreamBenchOptions& options, const StackOptions& stack);

}  // namespace pstrain::bench
