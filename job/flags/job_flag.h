// --job for every pstrain binary: the job file a process starts from, or,
// without one, the job its coordinator hands out. Only binaries link this
// (libraries never read flags).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security/curve_keys.h"
#include "job/job_spec.h"

namespace pstrain::job {

// Where a process looks for its job when --job is not given.
struct JobSourceOptions {
  std::string coordinator;  // ask this coordinator ("": do not ask)
  CurveKeys curve;
  absl::Duration connect_timeout = absl::Seconds(60);
};

// Reads the job of this process and sets the flags of the fields `roles`
// read that were not given explicitly (job/job_flags.h): --job's file; else,
// when `from.coordinator` is set and no field `roles` read was given (the
// node was started with only its own settings), the coordinator's job,
// waiting for the coordinator up to `from.connect_timeout` (then it goes on
// with its flags: registering fails the same way). Returns the job as read
// (empty when there is none). Errors name the file or coordinator.
absl::StatusOr<JobSpec> TakeJob(int argc, char** argv, uint8_t roles, const JobSourceOptions& from);

// The value of --job.
std::string JobFileFlag();

}  // namespace pstrain::job
