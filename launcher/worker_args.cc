#include "launcher/worker_args.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process.h"
#include "launcher/command.h"
#include "server/coordinator/flags/coordinator_flags.h"
#include "worker/flags/worker_flags.h"

namespace pstrain::launcher {
namespace {

// The project flag `name` (also "noNAME" for a boolean), with the value a
// bare --NAME or --noNAME means; nullptr when there is none.
absl::CommandLineFlag* FindWorkerFlag(const std::string& name, std::string* value) {
  absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
  if (f != nullptr && IsProjectFlag(*f)) return f;
  if (absl::StartsWith(name, "no")) {
    f = absl::FindCommandLineFlag(name.substr(2));
    if (f != nullptr && IsProjectFlag(*f) && f->IsOfType<bool>() && *value == "true") {
      *value = "false";
      return f;
    }
  }
  return nullptr;
}

// Sets worker flags and puts back, when it goes, the values they had
// (absl::FlagSaver would too, logging a line for each).
class FlagSetter {
 public:
  explicit FlagSetter(const std::vector<std::string>& other_flags) : other_flags_(other_flags) {}
  ~FlagSetter() {
    std::string ignored;
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) it->first->ParseFrom(it->second, &ignored);
  }

  absl::Status Set(const std::string& name, std::string value) {
    absl::CommandLineFlag* f = FindWorkerFlag(name, &value);
    if (f == nullptr) {
      std::vector<std::string> known = WorkerFlagNames();
      known.insert(known.end(), other_flags_.begin(), other_flags_.end());
      return UsageError(absl::StrCat("unknown flag --", name, DidYouMean(name, known)));
    }
    saved_.emplace_back(f, f->CurrentValue());
    std::string error;
    if (!f->ParseFrom(value, &error)) {
      return UsageError(absl::StrCat("--", name, "=", value, ": ", error));
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<std::string>& other_flags_;
  std::vector<std::pair<absl::CommandLineFlag*, std::string>> saved_;
};

}  // namespace

std::string WorkerFlagText(const Arg& a) {
  if (a.has_value) return a.text;
  std::string value = a.value;
  absl::CommandLineFlag* f = FindWorkerFlag(a.name, &value);
  if (f == nullptr || f->IsOfType<bool>()) return a.text;
  return absl::StrCat("--", a.name, "=", a.value);
}

std::vector<std::string> WorkerFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsProjectFlag(*flag)) names.emplace_back(name);
  }
  return names;
}

absl::StatusOr<worker::WorkerOptions> WorkerOptionsFromArgs(
    const std::vector<Arg>& args, const std::vector<std::string>& other_flags) {
  FlagSetter flags(other_flags);
  for (const std::string& text : FlagArgsFromEnv()) {
    const size_t eq = text.find('=');
    PS_RETURN_IF_ERROR(Annotate(flags.Set(text.substr(2, eq - 2), text.substr(eq + 1)),
                                "from the environment"));
  }
  for (const Arg& a : args) PS_RETURN_IF_ERROR(flags.Set(a.name, a.value));
  absl::StatusOr<worker::WorkerOptions> options = worker::WorkerOptionsFromFlags();
  if (!options.ok()) return UsageError(options.status().message());
  return options;
}

absl::StatusOr<server::CoordinatorOptions> CoordinatorOptionsFromArgs(const std::vector<Arg>& args) {
  const std::vector<std::string> no_others;
  FlagSetter flags(no_others);
  for (const Arg& a : args) PS_RETURN_IF_ERROR(flags.Set(a.name, a.value));
  server::CoordinatorOptions o;
  absl::Status st = server::CoordinatorOptionsFromFlags(&o);
  if (!st.ok()) return UsageError(st.message());
  return o;
}

}  // namespace pstrain::launcher
