#include "launcher/job_check.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process.h"
#include "job/job_flags.h"
#include "launcher/command.h"
#include "server/coordinator/flags/coordinator_flags.h"
#include "worker/flags/worker_flags.h"

namespace pstrain::launcher {
namespace {

constexpr uint8_t kAllRoles = job::kWorker | job::kServer | job::kCoordinator;

// Every project flag of this process back to its default.
void ResetFlags() {
  std::string ignored;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsProjectFlag(*flag)) flag->ParseFrom(flag->DefaultValue(), &ignored);
  }
}

// Sets the flag `name` (a bare --noNAME: NAME=false); `where` names the
// value's source in errors.
absl::Status SetFlag(std::string name, std::string value, const std::string& where) {
  absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
  if (f == nullptr && absl::StartsWith(name, "no")) {
    f = absl::FindCommandLineFlag(name.substr(2));
    value = "false";
  }
  if (f == nullptr) return UsageError(absl::StrCat(where, ": no such flag here"));
  std::string error;
  if (!f->ParseFrom(value, &error)) return UsageError(absl::StrCat(where, ": ", error));
  return absl::OkStatus();
}

}  // namespace

const std::vector<NodeFlag>& LocalNodeFlags() {
  static const auto* flags = new std::vector<NodeFlag>{
      {"log_level", kAllRoles},
      {"auth", kAllRoles},
      {"keys_dir", kAllRoles},
      {"connect_timeout", job::kWorker},
      {"coordinator_timeout", job::kWorker},
      {"continue_job", job::kCoordinator},
      {"new_job", job::kCoordinator},
  };
  return *flags;
}

const NodeFlag* FindLocalNodeFlag(const std::string& name) {
  for (const NodeFlag& f : LocalNodeFlags()) {
    if (name == f.name || name == absl::StrCat("no", f.name)) return &f;
  }
  return nullptr;
}

absl::StatusOr<CheckedJob> CheckJob(const job::JobSpec& spec, const std::vector<Arg>& node_args) {
  ResetFlags();
  absl::Status applied = job::ApplyToFlags(spec, kAllRoles, /*explicit_flags=*/{});
  if (!applied.ok()) return UsageError(applied.message());
  // Node settings from PSTRAIN_<FLAG> variables (the job's are in `spec`),
  // then from the command line, which wins.
  for (const std::string& text : FlagArgsFromEnv()) {
    const size_t eq = text.find('=');
    const std::string name = text.substr(2, eq - 2);
    if (FindLocalNodeFlag(name) == nullptr) continue;
    const std::string value = text.substr(eq + 1);
    PS_RETURN_IF_ERROR(SetFlag(name, value, absl::StrCat("PSTRAIN_", absl::AsciiStrToUpper(name), "=", value,
                                                         " (from the environment)")));
  }
  for (const Arg& a : node_args) {
    PS_RETURN_IF_ERROR(SetFlag(a.name, a.value, absl::StrCat("--", a.name, "=", a.value)));
  }
  CheckedJob out;
  absl::StatusOr<worker::WorkerOptions> w = worker::WorkerOptionsFromFlags();
  if (!w.ok()) return UsageError(w.status().message());
  out.worker = *std::move(w);
  absl::Status st = server::CoordinatorOptionsFromFlags(&out.coordinator);
  if (!st.ok()) return UsageError(st.message());
  return out;
}

}  // namespace pstrain::launcher
