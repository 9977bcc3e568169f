// A job applied to a process's flags: a job file (--job) or the job its
// coordinator hands out sets each flag of a field the process reads, unless
// the flag was given on the command line or as a PSTRAIN_ variable. Flags
// stay the one way a process reads its settings; the job only fills them.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "job/job_spec.h"

namespace pstrain::job {

// The names of the flags given to this process explicitly: on its command
// line (--name=v, --name v, --name, --noname) and as PSTRAIN_<NAME>
// variables (common/process.h FlagArgsFromEnv).
std::set<std::string> ExplicitFlags(int argc, char** argv);

// Sets this process's flag of each value in `spec` whose field one of
// `roles` reads and whose flag is defined here and not in `explicit_flags`.
// A value the flag rejects is an error naming where it came from
// ("job.json:12: train.batch_size=abc: ...").
absl::Status ApplyToFlags(const JobSpec& spec, uint8_t roles,
                          const std::set<std::string>& explicit_flags);

// The job this process runs: for each field one of `roles` reads whose flag
// is defined here, the flag's value and its source (a flag or variable in
// `explicit_flags`, else `spec`'s value, else the flag's default).
JobSpec ResolvedJob(const JobSpec& spec, uint8_t roles, const std::set<std::string>& explicit_flags);

}  // namespace pstrain::job
