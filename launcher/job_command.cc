// pstrain job show: the job a `pstrain local` with the same arguments would
// run, every field with its value and where it came from.
#include <cstdio>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "job/job_fields.h"
#include "launcher/commands.h"
#include "launcher/job_args.h"
#include "launcher/local_options.h"

namespace pstrain::launcher {
namespace {

// A field's default as `pstrain local` would run it: the launcher's own
// (e.g. --servers=2), else the flag's in the binary that reads it.
std::string DefaultOf(const job::JobField& f, const FlagSet& local) {
  const std::string flag(f.flag);
  const auto& names = local.names();
  if (std::find(names.begin(), names.end(), flag) != names.end()) return local.Get(flag);
  if (const absl::CommandLineFlag* cf = absl::FindCommandLineFlag(flag); cf != nullptr) {
    return cf->DefaultValue();
  }
  return "(pstrain_coordinator's default)";
}

std::string Quoted(const std::string& v) { return v.empty() ? "\"\"" : v; }

std::string Show(const job::JobSpec& spec, const std::string& file) {
  const FlagSet local = LocalFlags();
  std::string out;
  absl::StrAppend(&out, "job", spec.name().empty() ? "" : " " + spec.name(),
                  file.empty() ? " (no job file: defaults and flags)" : " from " + file, "\n");
  if (!spec.description().empty()) absl::StrAppend(&out, "  ", spec.description(), "\n");
  size_t width = 0;
  for (const job::JobField& f : job::JobFields()) width = std::max(width, f.path.size());
  std::string section;
  for (const job::JobField& f : job::JobFields()) {
    const std::string this_section(f.path.substr(0, f.path.find('.')));
    if (this_section != section) {
      section = this_section;
      absl::StrAppend(&out, "\n", section, "\n");
    }
    const job::JobValue* v = spec.Find(f.flag);
    std::string value = v != nullptr ? v->value : DefaultOf(f, local);
    std::string source = v != nullptr ? absl::StrCat(job::SourceName(v->source), " ", v->where)
                                      : "default";
    std::string line = absl::StrCat("  ", f.path, std::string(width + 2 - f.path.size(), ' '),
                                    Quoted(value));
    line.resize(std::max(line.size() + 2, width + 24), ' ');
    absl::StrAppend(&out, line, source, "   --", f.flag, "\n");
  }
  return out;
}

}  // namespace

std::string JobHelp() {
  return "usage: pstrain job show [--job=FILE] [flags]\n\n"
         "Prints the job that `pstrain local` with the same arguments runs: every field of a job\n"
         "file (cluster, tables, model, data, train, eval, checkpoint, export) with its value and\n"
         "where the value came from (default, file:LINE, environment PSTRAIN_<FLAG>, flag), and\n"
         "the flag each field stands for. Then it checks the job as pstrain local does (flags,\n"
         "schema, data files) and says whether it would start: exit 0 when it would, 2 with the\n"
         "reason when not. See docs/job-file.md and examples/jobs/.\n";
}

absl::Status RunJob(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] != "show") {
    return UsageError(absl::StrCat(argv.empty() ? "no action" : "unknown action '" + argv[0] + "'",
                                   ": pstrain job show [--job=FILE] [flags]"));
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  absl::StatusOr<std::vector<Arg>> args = ParseArgs(rest);
  if (!args.ok()) return UsageError(args.status().message());
  PS_ASSIGN_OR_RETURN(LauncherJob job, ExpandJob(*args));
  std::string file;
  for (const Arg& a : *args) {
    if (a.name == "job") file = a.value;
  }
  std::fputs(Show(job.spec, file).c_str(), stdout);
  absl::StatusOr<LocalOptions> checked = ParseLocalOptions(rest);
  if (!checked.ok()) {
    std::printf("\ncheck: pstrain local would not start this job:\n");
    std::fflush(stdout);
    return checked.status();
  }
  std::printf("\ncheck: ok (flags, schema and data files as pstrain local checks them)\n");
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
