// A job file among the launcher's arguments (`pstrain local --job=F`,
// `pstrain job show --job=F`): the file's fields become flags ahead of the
// command line's, which override them, and the job the cluster runs is the
// file with those overrides.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "launcher/args.h"

namespace pstrain::launcher {

struct LauncherJob {
  // The job: the file's fields, a PSTRAIN_<FLAG> variable over a file's
  // field, then every job field the command line gives (as a flag).
  job::JobSpec spec;
  // The file's fields as flags (those no PSTRAIN_ variable overrides), then
  // `args` without --job.
  std::vector<Arg> args;
};

// The job field an argument sets, with its value in `value`: --overlap,
// --nooverlap and --overlap=false alike; null for a flag of no field.
const job::JobField* JobFieldOf(const Arg& a, std::string* value);

// Reads the --job among `args` (the last one; none: an empty spec). Usage
// errors (launcher/command.h) name the file and line.
absl::StatusOr<LauncherJob> ExpandJob(const std::vector<Arg>& args);

}  // namespace pstrain::launcher
