// Options of pipeline mode (--mode=pipeline): how many stages and replicas,
// how a batch is cut into micro-batches, which schedule runs them, how the
// tower is split, and how long a stage waits for a neighbour. Plain data.
#pragma once

#include <string>

#include "absl/time/time.h"

namespace pstrain::worker {

enum class PipeSchedule { kGpipe, k1F1B };

struct PipelineOptions {
  int stages = 1;        // P: stages of one pipeline (workers per replica)
  int replicas = 1;      // R: pipelines side by side; the job has R x P x T workers
  // T: workers per stage, each holding a slice of the stage's tower layers
  // (tensor parallelism, worker/pipeline/tensor_parallel.h).
  int tensor_parallel = 1;
  int microbatches = 1;  // M: micro-batches per batch
  PipeSchedule schedule = PipeSchedule::k1F1B;
  // Tower layer ranges per stage, e.g. "0-5,6-11" (empty: balanced by cost).
  std::string stage_layers;
  // Longest wait for a neighbour that is alive but sends nothing: it only
  // bounds a stuck stage, and a slow one's step may take minutes.
  absl::Duration timeout = absl::Seconds(300);
  // While waiting, a neighbour that has sent nothing for `ping_interval` is
  // pinged; no answer within `ping_timeout` means it is gone. A ping a
  // second is cheap; 15 s rides out a stall of a loaded machine.
  absl::Duration ping_interval = absl::Seconds(1);
  absl::Duration ping_timeout = absl::Seconds(15);
};

// "gpipe" or "1f1b".
const char* ScheduleName(PipeSchedule s);

// Where worker `rank` sits: replicas are blocks of `stages` adjacent ranks.
struct StagePlace {
  int replica = 0;
  int stage = 0;
};
inline StagePlace PlaceOf(int rank, int stages) { return {rank / stages, rank % stages}; }
inline int RankOf(int replica, int stage, int stages) { return replica * stages + stage; }

}  // namespace pstrain::worker
