// The serving bench (`pstrain_bench serve`): a DLRM export (the default
// dlrm: 13 dense, 26 categorical, dim 16) with --serve_rows embedding rows
// over its 26 tables, served in process by worker::ModelServer on
// 127.0.0.1 (--serve_threads request threads), with one client on a
// keep-alive connection sending rows of a synthetic Criteo file as text:
//   latency:  1-row requests, back to back, for --seconds: p50, p99 (us);
//   batch:    --serve_batch-row requests for --seconds: rows/s, and rows
//             per CPU second of the whole process (server and client);
//   reload:   1-row requests while a new version of --serve_rows rows is
//             written beside the served one, put in place, and loaded by
//             the server's watcher: requests, failures, p50/p99 over the
//             window, and whether the new version was being served at
//             the end;
//   delta:    the same while a delta of --serve_delta_rows changed rows
//             (version 2 of a versioned export folder, on a base of at
//             least as many rows) is read, applied to the server's standby
//             copy and swapped in: requests, failures, p50/p99, seconds
//             until version 2 was served.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace pstrain::bench {

struct ServeBenchOptions {
  uint64_t rows = 1'000'000;  // embedding rows of each version
  uint64_t delta_rows = 1'000'000;  // rows of the delta phase's delta
  int threads = 2;            // the server's request threads
  int batch = 256;            // rows per request in the batch phase
  double seconds = 5;         // per phase
};

absl::Status RunServeBench(const ServeBenchOptions& options);

}  // namespace pstrain::bench
