// Worker flags checked inside the launcher: `pstrain local` and `pstrain
// plan` hold flags meant for pstrain_worker and check them the way the
// worker will, before any process starts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/args.h"
#include "server/coordinator/coordinator.h"
#include "worker/worker_app.h"

namespace pstrain::launcher {

// The worker options that the PSTRAIN_* environment and then `args` (worker
// flags) describe, as pstrain_worker would compute them. This process's
// flags are left as they were. Usage errors (launcher/command.h) name the
// flag: an unknown one with the closest known name among the worker's
// flags and `other_flags` (flags the caller itself takes).
absl::StatusOr<worker::WorkerOptions> WorkerOptionsFromArgs(
    const std::vector<Arg>& args, const std::vector<std::string>& other_flags);

// `a` as pstrain_worker takes it: a bare flag stays bare for a boolean
// (--overlap, --nooverlap) and becomes --NAME=true for any other, whose
// parser reads "true" (a bare --keep_best) instead of taking the next
// argument as its value.
std::string WorkerFlagText(const Arg& a);

// The coordinator's options that `args` (coordinator flags) describe, as
// pstrain_coordinator computes them (server/coordinator/flags); this
// process's flags are left as they were. Usage errors name the flag.
absl::StatusOr<server::CoordinatorOptions> CoordinatorOptionsFromArgs(const std::vector<Arg>& args);

// The names of the worker's flags (pstrain_worker --help).
std::vector<std::string> WorkerFlagNames();

}  // namespace pstrain::launcher
