// The raw ZeroMQ request/reply baseline: a DEALER client and a ROUTER
// server in two threads of this process over tcp://127.0.0.1, one request
// of `bytes` outstanding at a time, answered with `bytes`, both sent
// zero-copy. What pstrain's stack is compared against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_util.h"

namespace pstrain::bench {

struct ZmqBenchOptions {
  size_t bytes = 64;
  double seconds = 2.0;
  // 2: client and server each have their own context (and I/O thread), as
  // two processes would; 1: one shared context.
  int contexts = 2;
  // Pins the server thread (and, with 2 contexts, its I/O thread) and the
  // client's to these CPUs (empty: unpinned), like the stack's --pin_nodes.
  std::vector<int> server_cpus, client_cpus;
};

struct ZmqBenchResult {
  int64_t iterations = 0;
  double seconds = 0;
  double gbps = 0;  // (bytes sent + bytes received) / s / 1e9
  Latencies latency_us;
};

absl::StatusOr<ZmqBenchResult> RunZmqBench(const ZmqBenchOptions& options);

}  // namespace pstrain::bench
