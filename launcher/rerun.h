// A `pstrain local` run in a --checkpoint_dir whose journal says the job
// there finished: training it again would train nothing (every worker's
// position is at its end), so the launcher decides before any process
// starts whether to report the finished job, train it on for the epochs
// that --epochs adds, or start over (--new_job).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

struct Rerun {
  enum class Action {
    kStart,     // no finished job there (or --new_job / --continue_job given): start as asked
    kReport,    // the job finished and nothing more is asked: say so, exit 0
    kContinue,  // --epochs grew: train on from its latest checkpoint
  };
  Action action = Action::kStart;
  std::string message;  // what to tell the user (kReport, kContinue)
};

// What to do in `checkpoint_dir` ("" : kStart) for a run of `epochs`
// epochs. DataLoss when the journal there is damaged; FailedPrecondition
// (naming --new_job) when --epochs grew but the job left no checkpoint to
// train on from.
absl::StatusOr<Rerun> DecideRerun(const std::string& checkpoint_dir, int epochs, bool new_job,
                                  bool continue_job);

}  // namespace pstrain::launcher
