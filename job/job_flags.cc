#include "job/job_flags.h"

#include <cstdlib>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process.h"

namespace pstrain::job {
namespace {

// "--name=v", "--name", "-name", "--noname" -> "name" ("" for no flag).
std::string FlagName(absl::string_view arg) {
  if (!absl::StartsWith(arg, "-")) return "";
  arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
  std::string name(arg.substr(0, arg.find('=')));
  if (absl::FindCommandLineFlag(name) == nullptr && absl::StartsWith(name, "no") &&
      absl::FindCommandLineFlag(name.substr(2)) != nullptr) {
    name = name.substr(2);
  }
  return name;
}

}  // namespace

std::set<std::string> ExplicitFlags(int argc, char** argv) {
  std::set<std::string> names;
  for (const std::string& a : FlagArgsFromEnv()) names.insert(FlagName(a));
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (std::string name = FlagName(a); !name.empty()) names.insert(name);
  }
  return names;
}

absl::Status ApplyToFlags(const JobSpec& spec, uint8_t roles,
                          const std::set<std::string>& explicit_flags) {
  for (const JobValue& v : spec.values()) {
    if ((v.field->roles & roles) == 0) continue;
    const std::string flag(v.field->flag);
    if (explicit_flags.count(flag)) continue;
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    if (f == nullptr) continue;
    std::string error;
    if (!f->ParseFrom(v.value, &error)) {
      // A flag names itself ("--lr=abc: ..."); a file or variable names
      // where it is and the field ("job.json:12: train.lr=abc: ...").
      return absl::InvalidArgumentError(
          v.source == Source::kFlag
              ? absl::StrCat(v.where, "=", v.value, ": ", error)
              : absl::StrCat(v.where, ": ", v.field->path, "=", v.value, ": ", error));
    }
  }
  return absl::OkStatus();
}

JobSpec ResolvedJob(const JobSpec& spec, uint8_t roles, const std::set<std::string>& explicit_flags) {
  JobSpec out;
  out.set_name(spec.name());
  out.set_description(spec.description());
  for (const JobField& field : JobFields()) {
    if ((field.roles & roles) == 0) continue;
    const std::string flag(field.flag);
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    if (f == nullptr) continue;
    const JobValue* in_spec = spec.Find(flag);
    if (explicit_flags.count(flag)) {
      const std::string env = absl::StrCat("PSTRAIN_", absl::AsciiStrToUpper(flag));
      const char* e = std::getenv(env.c_str());
      // The command line wins over the environment (it is parsed after it).
      const bool from_env = e != nullptr && f->CurrentValue() == e;
      out.Set(field, f->CurrentValue(), from_env ? Source::kEnvironment : Source::kFlag,
              from_env ? env : absl::StrCat("--", flag));
    } else if (in_spec != nullptr) {
      out.Set(field, f->CurrentValue(), in_spec->source, in_spec->where);
    } else {
      out.Set(field, f->CurrentValue(), Source::kDefault, "");
    }
  }
  return out;
}

}  // namespace pstrain::job
