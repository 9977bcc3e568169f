// How a job trains: where its dense tables live and how workers combine
// their steps. The one place the mode's names are spelled.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

enum class TrainMode {
  kPs,         // every table on the parameter servers
  kAllreduce,  // dense tables replicated on the workers, summed by a collective
  kPipeline,   // the layers cut into stages, one worker per stage
};

// "ps", "allreduce" or "pipeline"; InvalidArgument naming the three.
absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name);
const char* TrainModeName(TrainMode mode);

}  // namespace pstrain
