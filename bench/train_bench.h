// Training throughput: (a) local — the model alone in this process, no
// servers: in-memory synthetic batches, parameters bound once, TrainStep in
// a loop (the compute ceiling); (b) ps — one server and one worker over
// loopback running the real Trainer on a synthetic training file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/bench_cluster.h"

namespace pstrain::bench {

struct TrainBenchOptions {
  std::string model = "dlrm";
  int batch_size = 1024;
  double seconds = 3.0;       // local: timed TrainStep loop
  int local_batches = 8;      // local: distinct batches cycled through
  int64_t train_rows = 300000;  // ps: rows in the training file
  std::string temp_dir;       // ps: where the file goes ("" = $TMPDIR or /tmp)
  StackOptions stack;           // ps: the transports
};

struct TrainBenchResult {
  int64_t steps = 0;
  int64_t samples = 0;
  double seconds = 0;
  double samples_per_sec = 0;
  // ps only: where the worker's time went.
  double compute_seconds = 0;
  double wait_seconds = 0;
  double data_seconds = 0;
  double reader_rows_per_sec = 0;
};

absl::StatusOr<TrainBenchResult> RunTrainLocal(const TrainBenchOptions& options);
absl::StatusOr<TrainBenchResult> RunTrainPs(const TrainBenchOptions& options);

}  // namespace pstrain::bench
