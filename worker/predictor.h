// Scoring with an exported model (`pstrain predict`): one process, no
// cluster. Ids the model never saw get the rows the servers would have
// created for them (the tables' deterministic initializers), exactly as in
// evaluation during training.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/eval/metrics.h"

namespace pstrain::worker {

struct PredictOptions {
  std::string model_dir;
  std::vector<std::string> data;  // paths or globs, same format as training
  std::string out;                // one probability per line ("" = none)
  int batch_size = 4096;
};

struct PredictResult {
  int64_t rows = 0;
  BinaryMetrics metrics;  // against the data's labels
  double seconds = 0;
};

absl::StatusOr<PredictResult> PredictFile(const PredictOptions& options);

}  // namespace pstrain::worker
