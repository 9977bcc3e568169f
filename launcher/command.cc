#include "launcher/command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "launcher/args.h"

namespace pstrain::launcher {
namespace {

constexpr absl::string_view kExitCodePayload = "type.pstrain/exit_code";

void ListCommands(const std::vector<Command>& commands, FILE* out) {
  std::fprintf(out, "usage: pstrain <command> [flags]\n\ncommands:\n");
  int width = 0;  // the longest name
  for (const Command& c : commands) width = std::max(width, static_cast<int>(std::strlen(c.name)));
  for (const Command& c : commands) {
    // A summary's continuation lines are indented for the width of 8.
    std::string summary = c.summary;
    for (size_t at = summary.find("\n           "); at != std::string::npos;
         at = summary.find("\n           ", at + 1)) {
      summary.insert(at + 1, std::string(width - 8, ' '));
    }
    std::fprintf(out, "  %-*s %s\n", width, c.name, summary.c_str());
  }
  std::fprintf(out,
               "\n`pstrain <command> --help` explains each command's flags.\n"
               "The cluster binaries are pstrain_coordinator, pstrain_server and "
               "pstrain_worker.\n");
}

}  // namespace

std::string BinaryDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

absl::Status UsageError(absl::string_view message) {
  return WithExitCode(absl::InvalidArgumentError(message), 2);
}

absl::Status WithExitCode(absl::Status status, int code) {
  status.SetPayload(kExitCodePayload, absl::Cord(absl::StrCat(code)));
  return status;
}

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return 0;
  int code = 1;
  if (auto payload = status.GetPayload(kExitCodePayload); payload.has_value()) {
    if (!absl::SimpleAtoi(std::string(*payload), &code) || code == 0) code = 1;
  }
  return code;
}

int Dispatch(const std::vector<Command>& commands, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    ListCommands(commands, stderr);
    return 2;
  }
  if (argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    ListCommands(commands, stdout);
    return 0;
  }
  for (const Command& c : commands) {
    if (argv[0] != c.name) continue;
    std::vector<std::string> args(argv.begin() + 1, argv.end());
    if (WantsHelp(args)) {
      std::fputs(c.help().c_str(), stdout);
      return 0;
    }
    absl::Status st = c.run(args);
    const int code = ExitCodeOf(st);
    if (code != 0 && !st.message().empty()) {
      // Usage errors read as the message alone; others keep their code.
      std::string text = code == 2 ? std::string(st.message())
                                   : absl::StrCat(absl::StatusCodeToString(st.code()), ": ",
                                                  st.message());
      std::fprintf(stderr, "pstrain %s: %s\n", c.name, text.c_str());
    }
    std::fflush(stdout);
    return code;
  }
  std::fprintf(stderr, "pstrain: unknown command '%s'\n\n", argv[0].c_str());
  ListCommands(commands, stderr);
  return 2;
}

}  // namespace pstrain::launcher
