#include "job/flags/job_flag.h"

#include <set>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "cluster/job_fetch.h"
#include "common/process.h"
#include "common/status.h"
#include "job/job_flags.h"

ABSL_FLAG(std::string, job, "",
          "A job file (JSON with comments: cluster, tables, model, data, train, eval, checkpoint, "
          "export; see docs/job-file.md). Flags given as well override its fields. Without it, "
          "a server or worker takes the job its coordinator was given.");

namespace pstrain::job {

std::string JobFileFlag() { return absl::GetFlag(FLAGS_job); }

namespace {
// Whether `given` sets a field `roles` read: such a node was given its job
// (pstrain local, a script, a compose file with the job's variables) and
// runs on it, checking it at once, without asking the coordinator.
bool GivesJobField(const std::set<std::string>& given, uint8_t roles) {
  for (const std::string& flag : given) {
    const JobField* f = FieldOfFlag(flag);
    if (f != nullptr && (f->roles & roles) != 0) return true;
  }
  return false;
}
}  // namespace

namespace {
// --help lists the flags by the job file's sections, then this process's own.
const bool kSectionsSet = [] {
  FlagSections s;
  for (const std::string& section : JobSections()) s.order.push_back("job: " + section);
  s.section_of = [](absl::string_view flag) -> std::string {
    if (flag == "job") return "job: " + JobSections().front();
    const JobField* f = FieldOfFlag(flag);
    if (f == nullptr) return "";
    return absl::StrCat("job: ", f->path.substr(0, f->path.find('.')));
  };
  s.rest = "this process (not part of a job)";
  SetFlagSections(std::move(s));
  return true;
}();
}  // namespace

absl::StatusOr<JobSpec> TakeJob(int argc, char** argv, uint8_t roles, const JobSourceOptions& from) {
  JobSpec spec;
  const std::set<std::string> given = ExplicitFlags(argc, argv);
  if (const std::string file = JobFileFlag(); !file.empty()) {
    PS_ASSIGN_OR_RETURN(spec, JobSpec::ReadFile(file));
  } else if (!from.coordinator.empty() && !GivesJobField(given, roles)) {
    absl::StatusOr<std::optional<std::string>> text =
        FetchJobSpec(from.coordinator, from.curve, from.connect_timeout);
    if (!text.ok()) {
      // Unreachable, or a coordinator that finished the job: registering
      // meets the same and says what it means (wait, fail, or end cleanly).
      spdlog::warn("no job from the coordinator: {}; going on with this process's flags",
                   text.status().ToString());
      return spec;
    }
    if (!*text) return spec;
    PS_ASSIGN_OR_RETURN(spec, JobSpec::Parse(**text, absl::StrCat("the job of coordinator ", from.coordinator),
                                             Source::kCoordinator));
    spdlog::info("took the job from the coordinator at {} ({} fields set)", from.coordinator,
                 spec.values().size());
  }
  PS_RETURN_IF_ERROR(ApplyToFlags(spec, roles, given));
  return spec;
}

}  // namespace pstrain::job
