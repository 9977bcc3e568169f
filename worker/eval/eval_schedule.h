// EvalSchedule: when a run's periodic evaluation rounds fall, every N steps
// (--eval_every_steps) or at the end of every M epochs
// (--eval_every_epochs). The final evaluation, after training, is not a
// round of the schedule. Rounds are numbered from 0 by where they fall, so
// that every worker (also one that resumes or starts late) names a round
// the same way: step rounds by step (round r ends step (r + 1) N), epoch
// rounds by epoch (round r ends epoch (r + 1) M, counted from 1).
//
// Workers may reach rounds at different steps (their shards hold different
// numbers of rows) or not at all (out of data first): the schedule only says
// where a worker's own rounds fall. Pure logic, thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pstrain::worker {

class EvalSchedule {
 public:
  EvalSchedule() = default;
  // `epochs`: the run's passes over the data (0: unbounded, then every
  // epoch end is a round). InvalidArgument, naming the flags, when both
  // kinds are set or either is negative.
  static absl::Status Check(int64_t every_steps, int every_epochs);
  EvalSchedule(int64_t every_steps, int every_epochs, int epochs)
      : every_steps_(every_steps > 0 ? every_steps : 0),
        every_epochs_(every_epochs > 0 ? every_epochs : 0),
        epochs_(epochs) {}

  bool enabled() const { return every_steps_ > 0 || every_epochs_ > 0; }
  bool by_epochs() const { return every_epochs_ > 0; }

  // The round that step `step` (steps trained, from 1) ends, or -1.
  int RoundAtStep(int64_t step) const;
  // The round that the end of 0-based epoch `epoch` is, or -1 (not on the
  // schedule, or the last epoch: the final evaluation follows it).
  int RoundAtEpochEnd(int epoch) const;
  // The first round a worker can still reach when it starts (or resumes)
  // after `steps` steps in 0-based epoch `epoch`.
  int FirstRound(int64_t steps, int epoch) const;
  // Whether a worker that resumed after `resumed_steps` steps will not score
  // the round that falls at step `round_step` (so another must score its
  // share): a step round at or before the resume (FirstRound starts after
  // it); an epoch round, whose step is where some worker reached it, only
  // before.
  bool ResumedPast(int64_t resumed_steps, int64_t round_step) const {
    return by_epochs() ? round_step < resumed_steps : round_step <= resumed_steps;
  }
  // Where round `round` falls, for logs: "step 440" or "epoch 2".
  std::string Where(int round) const;
  // Epoch rounds: the epochs done (counted from 1) at round `round`'s end.
  int EpochOf(int round) const { return (round + 1) * every_epochs_; }
  // "every 44 steps", "every epoch", "every 2 epochs" or "never".
  std::string Describe() const;

 private:
  int64_t every_steps_ = 0;
  int every_epochs_ = 0;
  int epochs_ = 1;
};

}  // namespace pstrain::worker
