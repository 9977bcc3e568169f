#include "common/process.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/resolver.h"

extern char** environ;

namespace pstrain {

std::vector<std::string> FlagArgsFromEnv() {
  std::vector<std::string> from_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (!absl::StartsWith(kv, "PSTRAIN_")) continue;
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    std::string name = absl::AsciiStrToLower(kv.substr(8, eq - 8));
    if (absl::FindCommandLineFlag(name) == nullptr) continue;
    from_env.push_back(absl::StrCat("--", name, "=", kv.substr(eq + 1)));
  }
  std::sort(from_env.begin(), from_env.end());
  return from_env;
}

bool IsProjectFlag(const absl::CommandLineFlag& flag) {
  return !absl::StrContains(flag.Filename(), "absl/");
}

namespace {
FlagSections& Sections() {
  static auto* sections = new FlagSections;
  return *sections;
}
}  // namespace

void SetFlagSections(FlagSections sections) { Sections() = std::move(sections); }

std::string FlagsHelp(absl::string_view usage) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsProjectFlag(*flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  const FlagSections& sections = Sections();
  std::vector<std::string> order = sections.order;
  order.push_back(sections.section_of ? sections.rest : "flags");
  auto section_of = [&](const absl::CommandLineFlag* f) {
    std::string s = sections.section_of ? sections.section_of(f->Name()) : "";
    return s.empty() ? order.back() : s;
  };
  std::string out = absl::StrCat("usage: ", usage, "\n");
  for (const std::string& section : order) {
    std::string part;
    for (const absl::CommandLineFlag* f : flags) {
      if (section_of(f) != section) continue;
      std::string def = f->DefaultValue();
      absl::StrAppend(&part, "  --", f->Name(), " (default: ", def.empty() ? "\"\"" : def,
                      ")\n      ", f->Help(), "\n");
    }
    if (!part.empty()) absl::StrAppend(&out, "\n", section, ":\n", part);
  }
  return out;
}

void ConfigureResolverFromEnv() {
  const char* hosts = std::getenv("PSTRAIN_TEST_HOSTS_FILE");
  if (hosts == nullptr || *hosts == '\0') return;
  ResolverOptions o;
  o.hosts_file = hosts;
  Resolver::SetDefaultOptions(std::move(o));
}

std::vector<std::string> ParseFlagsWithEnv(int argc, char** argv, absl::string_view usage) {
  ConfigureResolverFromEnv();
  absl::SetProgramUsageMessage(usage);
  // --help lists this project's flags, without the build paths of the files
  // that define them, and exits 0; Abseil's own flags stay in --helpfull.
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--help" || a == "-h" || a == "-help" || a == "--helpshort") {
      std::fputs(FlagsHelp(usage).c_str(), stdout);
      std::fflush(stdout);
      std::exit(0);
    }
  }
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return !absl::StrContains(path, "absl/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  std::vector<std::string> from_env = FlagArgsFromEnv();
  std::vector<char*> args;
  args.push_back(argv[0]);
  for (auto& s : from_env) args.push_back(s.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  std::vector<std::string> positional;
  for (size_t i = 1; i < rest.size(); ++i) positional.emplace_back(rest[i]);
  return positional;
}

void InitLogging(const std::string& name, const std::string& level) {
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern(absl::StrCat("[%H:%M:%S.%e] [%^%l%$] ", name, ": %v"));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

void ExitWithin(absl::Duration grace, int exit_code) {
  static std::atomic<bool> armed{false};
  if (armed.exchange(true)) return;
  std::thread([grace, exit_code] {
    absl::SleepFor(grace);
    spdlog::error("shutdown did not finish within {}: exiting with code {}",
                  absl::FormatDuration(grace), exit_code);
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }).detach();
}

void IgnoreBrokenPipes() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

void HandleTerminationSignals(std::function<void(int)> fn) {
  IgnoreBrokenPipes();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, fn = std::move(fn)] {
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      fn(sig);
    }
  }).detach();
}

}  // namespace pstrain
