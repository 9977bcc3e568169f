// The pstrain_bench subcommands (zmq, kv, sparse, sparse_stream,
// sparse_tier, train, reader, all): each runs its benchmark and prints one JSON object per
// result line on stdout; progress and logs go to stderr.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/bench_cluster.h"
#include "bench/reader_bench.h"
#include "bench/export_bench.h"
#include "bench/serve_bench.h"
#include "bench/stream_bench.h"
#include "bench/tier_bench.h"
#include "bench/sparse_bench.h"
#include "bench/train_bench.h"

namespace pstrain::bench {

struct BenchOptions {
  std::vector<size_t> bytes = {64, size_t{4} << 20};  // zmq / kv message sizes
  int servers = 0;      // 0: the subcommand's default (kv 1, sparse 2)
  int workers = 1;
  double seconds = 3.0;  // per result
  int rounds = 3;        // kv: alternations of zmq and kv runs
  int zmq_contexts = 2;
  bool zmq_pinned = false;  // pin the zmq baseline as --pin_nodes pins the stack
  bool kv_baseline = true;       // kv: also run the zmq baseline (off: for profiling)
  StackOptions stack;            // transports of the stack (kv, sparse, train ps)
  SparseBenchOptions sparse;
  TrainBenchOptions train;
  ReaderBenchOptions reader;
  StreamBenchOptions stream;
  TierBenchOptions tier;
  ServeBenchOptions serve;
  ExportBenchOptions exports;
  std::string train_mode = "both";  // local | ps | both
};

// The subcommands (`all` runs kv, sparse and train).
const std::vector<std::string>& BenchCommands();

// InvalidArgument for an unknown command or option; otherwise the first
// benchmark error.
absl::Status RunBenchCommand(const std::string& command, const BenchOptions& options);

}  // namespace pstrain::bench
