// A job's folder after the job: its --metrics_out file and its checkpoints,
// for `pstrain dashboard --job_dir` and `pstrain plot --job_dir`.
//
// The metrics file is DIR/metrics.jsonl, or else the one *.jsonl file of DIR
// whose lines are metrics records. Checkpoints are ckpt-* folders with a
// manifest (server/coordinator/checkpoint_manager.h) in DIR or in a folder
// directly under it (a --checkpoint_dir inside the job's folder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

// NotFound naming DIR when it is missing or holds no metrics file;
// InvalidArgument when it holds several (naming them).
absl::StatusOr<std::string> FindMetricsFile(const std::string& dir);

struct JobCheckpoint {
  int64_t step = 0;
  double time_unix = 0;  // when its manifest was written
  uint64_t bytes = 0;    // its shards together
  std::string path;
};

// The checkpoints found, by step; none when there are none.
std::vector<JobCheckpoint> FindCheckpoints(const std::string& dir);

}  // namespace pstrain::launcher
