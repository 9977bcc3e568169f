// Dense push + pull through the real stack: W worker threads, each with a
// KvClient, push `bytes` of gradients to one dense table of bytes/4 floats
// (SGD) and pull the table back, both issued back to back and then both
// waited, as a worker does. Runs against a BenchCluster set up by the
// caller with DenseBenchTable(bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_cluster.h"
#include "bench/bench_util.h"

namespace pstrain::bench {

struct KvBenchOptions {
  size_t bytes = 64;
  double seconds = 2.0;
};

struct KvBenchResult {
  int64_t iterations = 0;  // over all workers
  double seconds = 0;
  double gbps = 0;  // (bytes pushed + bytes pulled) / s / 1e9, all workers
  Latencies latency_us;  // per iteration (push + pull)
};

// The table the kv bench uses: bytes/4 floats (at least one), SGD.
std::vector<TableSpec> DenseBenchTable(size_t bytes);

absl::StatusOr<KvBenchResult> RunKvBench(BenchCluster& cluster, const KvBenchOptions& options);

}  // namespace pstrain::bench
