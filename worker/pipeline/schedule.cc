#include "worker/pipeline/schedule.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker {

const char* ScheduleName(PipeSchedule s) { return s == PipeSchedule::kGpipe ? "gpipe" : "1f1b"; }

absl::StatusOr<PipeSchedule> ParseSchedule(const std::string& name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n == "gpipe") return PipeSchedule::kGpipe;
  if (n == "1f1b") return PipeSchedule::k1F1B;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline schedule '", name, "' (expected gpipe or 1f1b)"));
}

std::vector<PipeOp> BuildSchedule(PipeSchedule schedule, int stages, int stage, int microbatches) {
  std::vector<PipeOp> ops;
  ops.reserve(2 * static_cast<size_t>(microbatches));
  const int m = microbatches;
  if (schedule == PipeSchedule::kGpipe) {
    for (int i = 0; i < m; ++i) ops.push_back({PipeOpKind::kForward, i});
    for (int i = 0; i < m; ++i) ops.push_back({PipeOpKind::kBackward, i});
    return ops;
  }
  const int warmup = std::min(stages - stage - 1, m);
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({PipeOpKind::kForward, next_forward});
  while (next_forward < m) {
    ops.push_back({PipeOpKind::kForward, next_forward++});
    ops.push_back({PipeOpKind::kBackward, next_backward++});
  }
  while (next_backward < m) ops.push_back({PipeOpKind::kBackward, next_backward++});
  return ops;
}

int PeakLiveMicrobatches(const std::vector<PipeOp>& ops) {
  int live = 0, peak = 0;
  for (const PipeOp& op : ops) {
    live += op.kind == PipeOpKind::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

double IdealBubble(int stages, int microbatches) {
  return static_cast<double>(stages - 1) / static_cast<double>(microbatches + stages - 1);
}

absl::StatusOr<ReplayResult> ReplaySchedule(PipeSchedule schedule,
                                            const std::vector<std::vector<double>>& forward,
                                            const std::vector<std::vector<double>>& backward) {
  const int stages = static_cast<int>(forward.size());
  if (stages == 0 || backward.size() != forward.size()) {
    return absl::InvalidArgumentError("replay needs forward and backward times of every stage");
  }
  const int m = static_cast<int>(forward[0].size());
  for (int k = 0; k < stages; ++k) {
    if (static_cast<int>(forward[k].size()) != m || static_cast<int>(backward[k].size()) != m) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay: stage ", k, " has op times for a different micro-batch count"));
    }
  }
  constexpr double kNotYet = -1;
  // Finish times, by [stage][microbatch].
  std::vector<std::vector<double>> f_done(stages, std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> b_done(stages, std::vector<double>(m, kNotYet));
  std::vector<std::vector<PipeOp>> ops(stages);
  for (int k = 0; k < stages; ++k) ops[k] = BuildSchedule(schedule, stages, k, m);
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  ReplayResult r;
  r.busy.assign(stages, 0.0);
  size_t remaining = 2 * static_cast<size_t>(stages) * m;
  while (remaining > 0) {
    bool progressed = false;
    for (int k = 0; k < stages; ++k) {
      while (next[k] < ops[k].size()) {
        const PipeOp& op = ops[k][next[k]];
        double ready = 0;
        if (op.kind == PipeOpKind::kForward) {
          if (k > 0) ready = f_done[k - 1][op.microbatch];
        } else {
          ready = k + 1 < stages ? b_done[k + 1][op.microbatch] : f_done[k][op.microbatch];
        }
        if (ready == kNotYet) break;
        const double cost = op.kind == PipeOpKind::kForward ? forward[k][op.microbatch]
                                                            : backward[k][op.microbatch];
        const double end = std::max(free_at[k], ready) + cost;
        (op.kind == PipeOpKind::kForward ? f_done : b_done)[k][op.microbatch] = end;
        free_at[k] = end;
        r.busy[k] += cost;
        ++next[k];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      return absl::FailedPreconditionError(
          absl::StrCat(ScheduleName(schedule), " cannot finish a step of ", m, " micro-batches on ",
                       stages, " stages (deadlock)"));
    }
  }
  r.makespan = *std::max_element(free_at.begin(), free_at.end());
  double idle = 0;
  for (int k = 0; k < stages; ++k) {
    idle += r.makespan > 0 ? 1.0 - r.busy[k] / r.makespan : 0.0;
  }
  r.bubble = idle / stages;
  return r;
}

}  // namespace pstrain::worker
