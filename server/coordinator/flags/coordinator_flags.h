// The coordinator's flags of the job (servers, workers, consistency,
// timeouts, checkpoints, recovery), defined once for every binary that
// runs or checks a coordinator: pstrain_coordinator and pstrain (which
// checks them before `pstrain local` starts anything). Only binaries link
// this file (libraries never read flags).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

// The job fields of `o` from the flags (not its endpoints and ports),
// checked (CheckCoordinatorOptions): InvalidArgument naming the flag.
absl::Status CoordinatorOptionsFromFlags(CoordinatorOptions* o);

// The names of the flags defined here.
const std::vector<std::string>& CoordinatorFlagNames();

}  // namespace pstrain::server
