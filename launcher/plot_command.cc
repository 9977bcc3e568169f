// pstrain plot: training curves of one or several runs from their
// --metrics_out files, as one self-contained HTML page (and a PNG of it
// when a headless Chromium is available).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "launcher/plot_html.h"

extern char** environ;

namespace pstrain::launcher {
namespace {

// A headless Chromium renders the page in a few seconds; a cold start on a
// busy machine can take a minute.
constexpr absl::Duration kScreenshotTimeout = absl::Seconds(90);
// How often the screenshot's process is checked for its exit.
constexpr absl::Duration kScreenshotPoll = absl::Milliseconds(100);

// A Chromium to take screenshots with: $PSTRAIN_CHROMIUM, or the usual
// names on PATH. Empty when there is none.
std::string FindChromium() {
  if (const char* env = std::getenv("PSTRAIN_CHROMIUM"); env != nullptr && *env != '\0') return env;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome", "chrome"}) {
      std::string candidate = absl::StrCat(std::string(dir), "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

// Renders `html_path` into `png_path` with headless Chromium, within
// `timeout`. Its own output goes to /dev/null.
absl::Status Screenshot(const std::string& chromium, const std::string& html_path,
                        const std::string& png_path, int width, int height,
                        absl::Duration timeout) {
  char tmpl[] = "/tmp/pstrain-plot-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  std::string profile = tmpl;
  std::string url = "file://" + std::filesystem::absolute(html_path).string();
  std::vector<std::string> args = {chromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-quic",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--hide-scrollbars",
                                   "--virtual-time-budget=3000",
                                   "--user-data-dir=" + profile,
                                   absl::StrCat("--window-size=", width, ",", height),
                                   "--screenshot=" + std::filesystem::absolute(png_path).string(),
                                   url};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: killed as one
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, chromium.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  absl::Status st;
  if (rc != 0) {
    st = absl::UnavailableError(absl::StrCat("cannot start ", chromium));
  } else {
    absl::Time give_up = absl::Now() + timeout;
    int status = 0;
    while (true) {
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (absl::Now() > give_up) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        st = absl::DeadlineExceededError(absl::StrCat(chromium, " did not finish the screenshot in ",
                                                      absl::FormatDuration(timeout)));
        break;
      }
      absl::SleepFor(kScreenshotPoll);
    }
    if (st.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      st = absl::InternalError(absl::StrCat(chromium, " failed to take the screenshot"));
    }
    if (st.ok() && !std::filesystem::exists(png_path)) {
      st = absl::InternalError(absl::StrCat(chromium, " wrote no ", png_path));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(profile, ec);
  return st;
}

FlagSet PlotFlags() {
  FlagSet flags;
  flags.Define("out", "curves.html", "The HTML file to write.")
      .Define("png", "", "Also render the page to this PNG (needs headless Chromium).")
      .Define("names", "", "Comma-separated legend names, one per file (default: file names).")
      .Define("title", "pstrain training curves", "Title of the page.");
  return flags;
}

}  // namespace

std::string PlotHelp() {
  return absl::StrCat(
      "usage: pstrain plot METRICS.jsonl [MORE.jsonl ...] --out=curves.html [--png=curves.png]\n\n"
      "Draws the training loss, throughput, eval AUC and eval logloss of one or several\n"
      "runs (files written by --metrics_out) side by side, with their summaries, in one\n"
      "self-contained HTML page (no network needed to view it). With --png, a headless\n"
      "Chromium ($PSTRAIN_CHROMIUM or chromium on PATH) also renders it to a PNG.\n\n",
      PlotFlags().Help());
}

absl::Status RunPlot(const std::vector<std::string>& argv) {
  FlagSet flags = PlotFlags();
  // Files are positional; flags take "--name=value" or "--name value".
  std::vector<std::string> files, flag_args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0) {
      files.push_back(a);
    } else if (a.find('=') == std::string::npos && i + 1 < argv.size() &&
               argv[i + 1].rfind("--", 0) != 0) {
      flag_args.push_back(a + "=" + argv[++i]);
    } else {
      flag_args.push_back(a);
    }
  }
  PS_RETURN_IF_ERROR(flags.Parse(flag_args, /*keep_unknown=*/false).status());
  if (files.empty()) return UsageError("no metrics files given");
  std::vector<std::string> names = absl::StrSplit(flags.Get("names"), ',', absl::SkipEmpty());
  if (!names.empty() && names.size() != files.size()) {
    return UsageError("--names needs one name per file");
  }
  if (names.empty()) names = DefaultRunNames(files);
  std::vector<RunCurves> runs;
  for (size_t i = 0; i < files.size(); ++i) {
    int bad = 0;
    PS_ASSIGN_OR_RETURN(std::vector<RunCurves> r, ReadRunCurves(files[i], names[i], &bad));
    if (bad > 0) std::fprintf(stderr, "pstrain plot: %s: skipped %d malformed lines\n", files[i].c_str(), bad);
    runs.insert(runs.end(), r.begin(), r.end());
  }
  std::string out = flags.Get("out");
  PS_RETURN_IF_ERROR(WriteFileAtomically(out, PlotHtml(runs, flags.Get("title"))));
  std::printf("wrote %s (%zu runs)\n", out.c_str(), runs.size());
  if (std::string png = flags.Get("png"); !png.empty()) {
    std::string chromium = FindChromium();
    if (chromium.empty()) {
      std::fprintf(stderr, "pstrain plot: no Chromium found (set PSTRAIN_CHROMIUM): no PNG written\n");
      return absl::OkStatus();
    }
    PS_RETURN_IF_ERROR(Screenshot(chromium, out, png, 1280, 1180, kScreenshotTimeout));
    std::printf("wrote %s\n", png.c_str());
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
