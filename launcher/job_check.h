// The job `pstrain local`, `pstrain plan` and `pstrain job show` check
// before anything starts, with the code every node runs on it: the spec set
// on the flags by job::ApplyToFlags (as each node applies the job it is
// given), then read into each role's options by that role's own function
// (worker::WorkerOptionsFromFlags, server::CoordinatorOptionsFromFlags).
// The pstrain binary links the worker's and the coordinator's flags for it:
// they are this process's own, and each check sets them afresh (defaults,
// then the job, then the node settings), so a check depends on nothing a
// previous one did.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "launcher/args.h"
#include "server/coordinator/coordinator.h"
#include "worker/worker_app.h"

namespace pstrain::launcher {

// A node's own settings that `pstrain local` passes on (not part of a job:
// job/job_fields.h NodeSettingReason), with the processes that take them.
struct NodeFlag {
  const char* name;
  uint8_t roles;  // job::Role bits
};
const std::vector<NodeFlag>& LocalNodeFlags();
// The entry of `name` (also "noNAME"), or null.
const NodeFlag* FindLocalNodeFlag(const std::string& name);

struct CheckedJob {
  worker::WorkerOptions worker;
  server::CoordinatorOptions coordinator;
};

// Checks `spec` and the node settings `node_args` (of LocalNodeFlags) as the
// worker and the coordinator will: a value a flag rejects, or options their
// roles refuse, is a usage error (launcher/command.h) naming the flag or the
// file and line.
absl::StatusOr<CheckedJob> CheckJob(const job::JobSpec& spec, const std::vector<Arg>& node_args);

}  // namespace pstrain::launcher
