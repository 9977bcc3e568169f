#include "worker/eval/eval_schedule.h"

#include "absl/strings/str_cat.h"

namespace pstrain::worker {

absl::Status EvalSchedule::Check(int64_t every_steps, int every_epochs) {
  if (every_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_every_steps=", every_steps, ": expected 0 (off) or a positive step count"));
  }
  if (every_epochs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_every_epochs=", every_epochs, ": expected 0 (off) or a positive epoch count"));
  }
  if (every_steps > 0 && every_epochs > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval_every_steps=", every_steps, " and --eval_every_epochs=", every_epochs,
        ": give one of them (rounds by steps, or at epoch ends)"));
  }
  return absl::OkStatus();
}

int EvalSchedule::RoundAtStep(int64_t step) const {
  if (every_steps_ <= 0 || step <= 0 || step % every_steps_ != 0) return -1;
  return static_cast<int>(step / every_steps_ - 1);
}

int EvalSchedule::RoundAtEpochEnd(int epoch) const {
  if (every_epochs_ <= 0 || epoch < 0) return -1;
  const int done = epoch + 1;  // epochs completed
  if (epochs_ > 0 && done >= epochs_) return -1;
  if (done % every_epochs_ != 0) return -1;
  return done / every_epochs_ - 1;
}

int EvalSchedule::FirstRound(int64_t steps, int epoch) const {
  if (every_steps_ > 0) return static_cast<int>(steps / every_steps_);
  if (every_epochs_ > 0) return epoch / every_epochs_;
  return 0;
}

std::string EvalSchedule::Where(int round) const {
  if (every_steps_ > 0) return absl::StrCat("step ", (static_cast<int64_t>(round) + 1) * every_steps_);
  if (every_epochs_ > 0) return absl::StrCat("the end of epoch ", (round + 1) * every_epochs_);
  return "the end";
}

std::string EvalSchedule::Describe() const {
  if (every_steps_ > 0) return absl::StrCat("every ", every_steps_, " steps");
  if (every_epochs_ == 1) return "every epoch";
  if (every_epochs_ > 1) return absl::StrCat("every ", every_epochs_, " epochs");
  return "never";
}

}  // namespace pstrain::worker
