#include "launcher/console.h"

#include <unistd.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain::launcher {
namespace {

// Lines of the cluster's own life: kept in each process's log (--v=1, or
// the binaries run on their own), left out of the person's view.
const std::regex& Details() {
  static const std::regex* re = new std::regex(
      "^(listening at |server [0-9]+ joined from |worker [0-9]+ joined from |[0-9]+ tables created"
      "|worker [0-9]+ finished$|all [0-9]+ workers finished; stopping the servers"
      "|told all |server [0-9]+ serving at |server [0-9]+: [0-9]+ dense and [0-9]+ sparse tables"
      "|server [0-9]+: shutting down|server [0-9]+: table |worker [0-9]+ of [0-9]+ at "
      "|standardize: |trained [0-9]+ steps, |allreduce mode: |registered |server [0-9]+: restored "
      "|resuming at step |checkpoint shard of step |stream partition .* files\\): epoch "
      "|partition .* done here: |checkpoint at step [0-9]+: )");
  return *re;
}

// "[12:01:02.345] [info] worker: message": the time, level and logger name
// the binaries put before each line.
const std::regex& Prefix() {
  static const std::regex* re =
      new std::regex("^\\[[0-9:.]+\\] \\[([a-z]+)\\] [a-z_]+: ");
  return *re;
}

}  // namespace

Console& Console::Get() {
  static Console* console = new Console();
  return *console;
}

void Console::Configure(int verbosity, bool terminal) {
  verbosity_ = verbosity;
  terminal_ = terminal;
}

std::string Console::Shown(const std::string& label, std::string_view line, bool* progress) const {
  *progress = false;
  std::string text(line);
  if (verbosity_ > 0) return absl::StrCat("[", label, "] ", text);
  std::smatch m;
  std::string level = "info";
  if (std::regex_search(text, m, Prefix())) {
    level = m[1].str();
    text = m.suffix().str();
  }
  if (level == "info" && std::regex_search(text, Details())) return "";
  if (stopping_ && absl::StrContains(text, "CANCELLED")) return "";
  if (level == "info" && absl::StartsWith(label, "worker ") && absl::StartsWith(text, "step ") &&
      absl::StrContains(text, " | ")) {
    *progress = true;
  }
  if (level == "warning" || level == "error" || level == "critical") {
    return absl::StrCat("[", label, "] ", level, ": ", text);
  }
  return absl::StrCat("[", label, "] ", text);
}

void Console::ChildLine(const std::string& label, std::string_view line) {
  bool progress = false;
  std::string shown = Shown(label, line, &progress);
  if (shown.empty()) return;
  if (progress && terminal_) {
    progress_ = shown;
    Write(absl::StrCat("\r\033[K", shown));
    return;
  }
  Write(absl::StrCat(progress_.empty() || !terminal_ ? "" : "\r\033[K", shown, "\n",
                     progress_.empty() || !terminal_ ? "" : progress_));
}

void Console::Say(const std::string& line) {
  Write(absl::StrCat(progress_.empty() || !terminal_ ? "" : "\r\033[K", "[pstrain] ", line, "\n",
                     progress_.empty() || !terminal_ ? "" : progress_));
}

void Console::EndProgress() {
  if (!progress_.empty() && terminal_) Write("\n");
  progress_.clear();
}

void Console::Write(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace pstrain::launcher
