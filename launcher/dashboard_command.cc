// pstrain dashboard --job_dir=DIR: the coordinator's dashboard page for a
// job that has ended, filled from its folder (launcher/finished_job.h), on
// 127.0.0.1 until Ctrl-C (or --serve_seconds).
#include <signal.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/http/http_server.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/finished_job.h"
#include "launcher/job_dir.h"
#include "launcher/run_curves.h"
#include "server/coordinator/dashboard/dashboard_routes.h"

namespace pstrain::launcher {
namespace {

FlagSet DashboardFlags() {
  FlagSet flags;
  flags.Define("job_dir", "", "The job's folder: its metrics file and checkpoints (see below).")
      .Define("metrics", "", "The metrics file (--metrics_out) instead of the one in --job_dir.")
      .Define("port", "0", "Port to serve on (0: a free one).")
      .Define("host", "127.0.0.1", "Address to listen on.")
      .Define("serve_seconds", "0", "Stop after this many seconds (0: at Ctrl-C).");
  return flags;
}

// Blocks until SIGINT or SIGTERM, or `seconds` (> 0) have passed.
// REQUIRES: both signals blocked in every thread.
void WaitForStop(double seconds) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const absl::Time until = seconds > 0 ? absl::Now() + absl::Seconds(seconds) : absl::InfiniteFuture();
  while (absl::Now() < until) {
    timespec slice{1, 0};
    if (sigtimedwait(&set, nullptr, &slice) > 0) return;
  }
}

}  // namespace

std::string DashboardHelp() {
  return absl::StrCat(
      "usage: pstrain dashboard --job_dir=DIR [--port=P] [--serve_seconds=S]\n"
      "       pstrain dashboard --metrics=run.jsonl\n\n"
      "Serves the dashboard that the coordinator serves while a job runs, for a job that\n"
      "has ended: the training loss, throughput, eval AUC and logloss (and normalized\n"
      "entropy and calibration when recorded) over steps, the run's summary and the\n"
      "checkpoints it left, on http://127.0.0.1:PORT/ (printed), until Ctrl-C.\n"
      "DIR's metrics file is DIR/metrics.jsonl, or the one *.jsonl in DIR written by\n"
      "--metrics_out; its checkpoints are ckpt-* folders with a manifest in DIR or in a\n"
      "folder directly under it. Errors in the file name it and the line: exit 2.\n\n",
      DashboardFlags().Help());
}

absl::Status RunDashboard(const std::vector<std::string>& argv) {
  FlagSet flags = DashboardFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  const std::string dir = flags.Get("job_dir");
  std::string metrics = flags.Get("metrics");
  if (dir.empty() && metrics.empty()) return UsageError("give --job_dir=DIR (or --metrics=FILE)");
  if (metrics.empty()) {
    absl::StatusOr<std::string> found = FindMetricsFile(dir);
    if (!found.ok()) return UsageError(found.status().message());
    metrics = *found;
  }
  PS_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("port"));
  PS_ASSIGN_OR_RETURN(double serve_seconds, flags.GetDouble("serve_seconds"));
  if (port < 0 || port > 65535) return UsageError("--port must be between 0 and 65535");
  absl::StatusOr<std::vector<RunCurves>> runs =
      ReadRunCurves(metrics, DefaultRunNames({metrics})[0], nullptr);
  if (!runs.ok()) return UsageError(runs.status().message());
  const std::vector<JobCheckpoint> checkpoints =
      dir.empty() ? std::vector<JobCheckpoint>{} : FindCheckpoints(dir);
  // Ctrl-C is waited for below, not delivered to a thread of the server.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  http::HttpServerOptions options;
  options.host = flags.Get("host");
  options.port = static_cast<int>(port);
  auto routes = server::DashboardRoutes(
      [runs = *runs, checkpoints, metrics](size_t points) {
        return FinishedJobStateJson(runs, checkpoints, metrics, points);
      });
  absl::StatusOr<std::unique_ptr<http::HttpServer>> http = http::StartHttpServer(options, routes);
  if (!http.ok()) return UsageError(absl::StrCat("--port=", port, ": ", http.status().message()));
  std::printf("dashboard of %s (%zu run%s, %zu checkpoints): http://%s:%d/\n", metrics.c_str(),
              runs->size(), runs->size() == 1 ? "" : "s", checkpoints.size(),
              options.host.c_str(), (*http)->port());
  std::fflush(stdout);
  WaitForStop(serve_seconds);
  (*http)->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
