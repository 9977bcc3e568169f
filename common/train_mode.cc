#include "common/train_mode.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name) {
  if (name == "ps") return TrainMode::kPs;
  if (name == "allreduce") return TrainMode::kAllreduce;
  if (name == "pipeline") return TrainMode::kPipeline;
  return absl::InvalidArgumentError(
      absl::StrCat("--mode must be ps, allreduce or pipeline, not '", name, "'"));
}

const char* TrainModeName(TrainMode mode) {
  switch (mode) {
    case TrainMode::kPs: return "ps";
    case TrainMode::kAllreduce: return "allreduce";
    case TrainMode::kPipeline: return "pipeline";
  }
  return "?";
}

}  // namespace pstrain
