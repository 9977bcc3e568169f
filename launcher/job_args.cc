#include "launcher/job_args.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "launcher/command.h"

namespace pstrain::launcher {
namespace {

// The PSTRAIN_<FLAG> variable of `flag` when it is set ("" otherwise).
std::string EnvName(absl::string_view flag) {
  std::string name = absl::StrCat("PSTRAIN_", absl::AsciiStrToUpper(flag));
  const char* v = std::getenv(name.c_str());
  return v != nullptr ? name : "";
}

}  // namespace

const job::JobField* JobFieldOf(const Arg& a, std::string* value) {
  *value = a.value;
  if (const job::JobField* f = job::FieldOfFlag(a.name); f != nullptr) return f;
  if (!a.has_value && absl::StartsWith(a.name, "no")) {
    if (const job::JobField* f = job::FieldOfFlag(a.name.substr(2)); f != nullptr) {
      *value = "false";
      return f;
    }
  }
  return nullptr;
}

absl::StatusOr<LauncherJob> ExpandJob(const std::vector<Arg>& args) {
  LauncherJob out;
  std::string file;
  for (const Arg& a : args) {
    if (a.name == "job") file = a.value;
  }
  if (!file.empty()) {
    absl::StatusOr<job::JobSpec> spec = job::JobSpec::ReadFile(file);
    if (!spec.ok()) return UsageError(spec.status().message());
    out.spec = *std::move(spec);
    for (const job::JobValue& v : out.spec.values()) {
      // A variable wins over the file, as it does in every process.
      if (!EnvName(v.field->flag).empty()) continue;
      Arg a;
      a.name = std::string(v.field->flag);
      a.value = v.value;
      a.has_value = true;
      a.text = absl::StrCat("--", a.name, "=", a.value);
      out.args.push_back(std::move(a));
    }
  }
  for (const job::JobField& f : job::JobFields()) {
    if (std::string env = EnvName(f.flag); !env.empty()) {
      out.spec.Set(f, std::getenv(env.c_str()), job::Source::kEnvironment, env);
    }
  }
  for (const Arg& a : args) {
    if (a.name == "job") continue;
    out.args.push_back(a);
    std::string value;
    if (const job::JobField* f = JobFieldOf(a, &value); f != nullptr) {
      out.spec.Set(*f, value, job::Source::kFlag, absl::StrCat("--", a.name));
    }
  }
  return out;
}

}  // namespace pstrain::launcher
