// Pipeline schedules: the order in which one stage runs the forward and
// backward passes of a step's micro-batches, and a replay of a step on
// dedicated cores (the bubble a schedule has for measured op costs).
//
//   GPipe: F0 F1 ... F(M-1) B0 B1 ... B(M-1)    (keeps M micro-batches alive)
//   1F1B:  w = min(P - stage - 1, M) warm-up forwards, then one forward and
//          one backward in turn, then the remaining backwards (keeps at most
//          P - stage micro-batches alive)
//
// Backwards run in micro-batch order in both, so a step's gradients add up
// in the same order whatever the schedule. Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/pipeline/pipeline_options.h"

namespace pstrain::worker {

enum class PipeOpKind { kForward, kBackward };

struct PipeOp {
  PipeOpKind kind = PipeOpKind::kForward;
  int microbatch = 0;
  bool operator==(const PipeOp& o) const { return kind == o.kind && microbatch == o.microbatch; }
};

absl::StatusOr<PipeSchedule> ParseSchedule(const std::string& name);

// The ops of `stage` (of `stages`) for a step of `microbatches`.
// REQUIRES: 0 <= stage < stages, microbatches >= 1.
std::vector<PipeOp> BuildSchedule(PipeSchedule schedule, int stages, int stage, int microbatches);

// Most micro-batches whose forward ran and backward did not, over `ops`.
int PeakLiveMicrobatches(const std::vector<PipeOp>& ops);

// (P - 1) / (M + P - 1): the idle fraction of a stage when every op of
// every stage costs the same (forward and backward alike, no communication).
double IdealBubble(int stages, int microbatches);

// One step replayed on P dedicated cores with zero-latency links: each op
// starts when its stage is free and its input exists (the forward of the
// previous stage, the backward of the next one).
struct ReplayResult {
  double makespan = 0;       // seconds from the first op to the last
  std::vector<double> busy;  // per stage, seconds of ops
  // Mean over stages of 1 - busy / makespan.
  double bubble = 0;
};

// forward[k][m] / backward[k][m]: seconds of stage k's ops on micro-batch m.
// FailedPrecondition when the schedule cannot finish (a deadlock).
absl::StatusOr<ReplayResult> ReplaySchedule(PipeSchedule schedule,
                                            const std::vector<std::vector<double>>& forward,
                                            const std::vector<std::vector<double>>& backward);

}  // namespace pstrain::worker
