// Worker flags (--model, --train_data, --lr, ...), defined once for every
// binary that runs a worker: pstrain_worker and `pstrain train`.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "worker/worker_app.h"

namespace pstrain::worker {

// The options the parsed flags describe; InvalidArgument for bad values.
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags();
std::string LogLevelFlag();
// --cpus (common/cpu_affinity.h PinProcess).
std::string CpusFlag();

}  // namespace pstrain::worker
