// pstrain local: a whole cluster on this machine.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/cpu_affinity.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/security/curve_keys.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "launcher/local_http.h"
#include "launcher/supervisor.h"

namespace pstrain::launcher {
namespace {

// Flags of the coordinator that `pstrain local` accepts and forwards.
const char* kCoordinatorFlags[] = {"consistency",       "staleness",
                                   "heartbeat_interval", "heartbeat_timeout",
                                   "join_timeout",      "dense_chunk",
                                   "checkpoint_dir",    "checkpoint_every_steps",
                                   "checkpoint_every_secs", "keep_checkpoints",
                                   "restore",           "recover_servers",      "elastic_workers",
                                   "worker_timeout",
                                   "recovery_timeout"};
// Flags forwarded to every process.
const char* kCommonFlags[] = {"log_level", "auth", "keys_dir"};

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

int g_wake_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};

std::string LastSummaryLine(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  std::string last;
  size_t start = 0;
  while (start < text->size()) {
    size_t nl = text->find('\n', start);
    if (nl == std::string::npos) nl = text->size();
    std::string line = text->substr(start, nl - start);
    if (line.find("\"event\":\"summary\"") != std::string::npos) last = line;
    start = nl + 1;
  }
  return last;
}

void Usage(const FlagSet& flags) {
  std::printf(
      "usage: pstrain local [--servers=S] [--workers=W] [--flagfile=F] [coordinator flags] "
      "[worker flags]\n\n"
      "Starts a coordinator, S servers and W workers on 127.0.0.1 with free ports, prefixes\n"
      "their output with role and rank, and stops them all when the job ends, when one of\n"
      "them fails (exit code 1) or on Ctrl-C. Coordinator flags forwarded: --%s.\n"
      "--auth=curve --keys_dir=DIR (see pstrain keygen) and --log_level go to every process.\n"
      "Every other flag goes to the workers (see pstrain_worker --help).\n\n%s",
      absl::StrJoin(kCoordinatorFlags, ", --").c_str(), flags.Help().c_str());
}

}  // namespace

int RunLocal(const std::vector<std::string>& argv) {
  FlagSet flags;
  flags.Define("servers", "2", "Number of parameter servers.")
      .Define("workers", "2", "Number of workers.")
      .Define("bin_dir", "", "Folder with the pstrain_* binaries (default: next to pstrain).")
      .Define("timeout", "0", "Stop everything after this many seconds (0: no limit).")
      .Define("metrics", "false", "Serve Prometheus /metrics from every process, on free ports (printed).")
      .Define("dashboard", "false", "Serve the coordinator's web dashboard on a free port (printed).")
      .Define("dashboard_port", "0", "Serve the dashboard on this port (0: see --dashboard).")
      .Define("restart_failed", "false",
              "Restart a server that dies (same rank); with --checkpoint_dir the cluster rolls back "
              "to the latest checkpoint and training goes on. With --elastic_workers, restart a "
              "worker (other than 0) that dies too: the coordinator re-admits it.")
      .Define("max_restarts", "3", "With --restart_failed: restarts allowed per process.")
      .Define("server_threads", "1", "Executor threads per server (pstrain_server --server_threads).")
      .Define("pin_cpus", "false",
              "Run the servers on one half of this machine's CPUs and the workers on the other "
              "(their --cpus), as if on two hosts: each reads what its I/O thread received from "
              "its own cache. Off: the scheduler places every process.")
      .Define("help", "false", "Show this help.");
  if (WantsHelp(argv)) {
    Usage(flags);
    return 0;
  }
  auto args = ParseArgs(argv);
  if (!args.ok()) {
    std::fprintf(stderr, "pstrain local: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  auto rest = flags.Take(*args, /*keep_unknown=*/true);
  auto servers = flags.GetInt("servers");
  auto workers = flags.GetInt("workers");
  auto timeout = flags.GetDouble("timeout");
  auto server_threads = flags.GetInt("server_threads");
  for (const absl::Status& st : {rest.status(), servers.status(), workers.status(), timeout.status(),
                                 server_threads.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "pstrain local: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  // Pipeline mode runs --replicas pipelines of --stages x --tensor_parallel
  // workers each.
  {
    std::string mode;
    int64_t stages = 1, replicas = 1, tensor_parallel = 1;
    for (const Arg& a : *rest) {
      if (a.name == "mode") mode = a.value;
      if (a.name == "stages") (void)absl::SimpleAtoi(a.value, &stages);
      if (a.name == "replicas") (void)absl::SimpleAtoi(a.value, &replicas);
      if (a.name == "tensor_parallel") (void)absl::SimpleAtoi(a.value, &tensor_parallel);
    }
    if (mode == "pipeline") {
      const int64_t needed = stages * replicas * tensor_parallel;
      if (!flags.IsSet("workers")) {
        *workers = needed;
      } else if (*workers != needed) {
        std::fprintf(stderr,
                     "pstrain local: --workers=%lld but --replicas x --stages x --tensor_parallel "
                     "= %lld\n",
                     static_cast<long long>(*workers), static_cast<long long>(needed));
        return 2;
      }
    }
  }
  if (*server_threads < 1 || *server_threads > 64) {
    std::fprintf(stderr, "pstrain local: --server_threads must be in [1, 64]\n");
    return 2;
  }
  if (*servers < 1 || *workers < 1 || *servers > 64 || *workers > 256) {
    std::fprintf(stderr, "pstrain local: need 1..64 servers and 1..256 workers\n");
    return 2;
  }
  auto dashboard_port = flags.GetInt("dashboard_port");
  if (!dashboard_port.ok() || *dashboard_port < 0 || *dashboard_port > 65535) {
    std::fprintf(stderr, "pstrain local: --dashboard_port must be in 0..65535\n");
    return 2;
  }
  auto http_ports = PickLocalHttpPorts(static_cast<int>(*servers), static_cast<int>(*workers),
                                       flags.GetBool("metrics"), flags.GetBool("dashboard"),
                                       static_cast<int>(*dashboard_port));
  if (!http_ports.ok()) {
    std::fprintf(stderr, "pstrain local: %s\n", std::string(http_ports.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> coord_args, all_args, worker_args;
  std::string metrics_out, auth, keys_dir;
  for (const Arg& a : *rest) {
    bool used = false;
    for (const char* f : kCoordinatorFlags) {
      if (a.name == f) {
        coord_args.push_back(a.text);
        used = true;
      }
    }
    for (const char* f : kCommonFlags) {
      if (a.name == f) {
        all_args.push_back(a.text);
        used = true;
      }
    }
    if (a.name == "auth") auth = a.value;
    if (a.name == "keys_dir") keys_dir = a.value;
    if (used) continue;
    if (a.name == "metrics_out") metrics_out = a.value;
    worker_args.push_back(a.text);
  }
  // Bad keys fail here, once, rather than in every child.
  if (auto keys = CurveKeysForAuth(auth, keys_dir); !keys.ok()) {
    std::fprintf(stderr, "pstrain local: %s\n", keys.status().ToString().c_str());
    return 2;
  }
  std::string bin = flags.Get("bin_dir").empty() ? SelfDir() : flags.Get("bin_dir");
  char tmpl[] = "/tmp/pstrain-local-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("pstrain local: mkdtemp");
    return 1;
  }
  std::string tmp = tmpl;
  std::string endpoint_file = tmp + "/coordinator";

  if (pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  HandleTerminationSignals([](int sig) {
    g_signal = sig;
    char c = 1;
    (void)!write(g_wake_pipe[1], &c, 1);
  });

  Supervisor sup;
  int exit_code = 0;
  auto fail = [&](const std::string& why, int code) {
    Supervisor::Say(why);
    sup.StopAll(absl::Seconds(5));
    exit_code = code;
  };
  absl::Time deadline = *timeout > 0 ? absl::Now() + absl::Seconds(*timeout) : absl::InfiniteFuture();

  std::vector<std::string> cargs = {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + endpoint_file,
                                    absl::StrCat("--servers=", *servers),
                                    absl::StrCat("--workers=", *workers)};
  cargs.insert(cargs.end(), coord_args.begin(), coord_args.end());
  cargs.insert(cargs.end(), all_args.begin(), all_args.end());
  for (const std::string& h : CoordinatorHttpArgs(*http_ports)) cargs.push_back(h);
  auto coord = sup.Start({"coordinator", bin + "/pstrain_coordinator", cargs});
  if (!coord.ok()) {
    Supervisor::Say(std::string(coord.status().message()));
    return 1;
  }
  // Wait for the coordinator to be listening.
  std::string endpoint;
  absl::Time wait_until = absl::Now() + absl::Seconds(30);
  while (endpoint.empty()) {
    sup.Pump(absl::Milliseconds(50), g_wake_pipe[0]);
    if (auto text = ReadFileToString(endpoint_file); text.ok() && !text->empty()) {
      endpoint = std::string(absl::StripAsciiWhitespace(*text));
    } else if (!sup.child(*coord).running || absl::Now() > wait_until || g_signal) {
      fail("the coordinator did not start", 1);
      std::filesystem::remove_all(tmp);
      return exit_code;
    }
  }
  Supervisor::Say(absl::StrCat("coordinator at ", endpoint, "; starting ", *servers, " servers and ",
                               *workers, " workers"));
  AnnounceHttpPorts(*http_ports);
  // Children that may be restarted: index -> (spec, restarts so far).
  std::map<int, std::pair<ChildSpec, int>> restartable;
  const bool restart_failed = flags.GetBool("restart_failed");
  bool elastic = false;
  for (const Arg& a : *rest) {
    if (a.name == "elastic_workers") elastic = !a.has_value || a.value == "true" || a.value == "1";
  }
  auto max_restarts = flags.GetInt("max_restarts");
  // --pin_cpus: servers on the first half of the CPUs, workers on the rest.
  std::string server_cpus, worker_cpus;
  if (flags.GetBool("pin_cpus")) {
    const CpuHalves halves = SplitAllowedCpus();
    if (halves.first.empty()) {
      Supervisor::Say("--pin_cpus: fewer than 2 CPUs, nothing pinned");
    } else {
      server_cpus = "--cpus=" + FormatCpuList(halves.first);
      worker_cpus = "--cpus=" + FormatCpuList(halves.second);
      Supervisor::Say(absl::StrCat("servers on CPUs ", server_cpus.substr(7), ", workers on ",
                                   worker_cpus.substr(7)));
    }
  }
  for (int s = 0; s < *servers; ++s) {
    std::vector<std::string> a = {"--coordinator=" + endpoint, "--bind=tcp://127.0.0.1:0",
                                  absl::StrCat("--rank=", s),
                                  absl::StrCat("--server_threads=", *server_threads)};
    a.insert(a.end(), all_args.begin(), all_args.end());
    for (const std::string& h : NodeHttpArgs(http_ports->server_metrics, s)) a.push_back(h);
    if (!server_cpus.empty()) a.push_back(server_cpus);
    ChildSpec spec{absl::StrCat("server ", s), bin + "/pstrain_server", a};
    auto st = sup.Start(spec);
    if (!st.ok()) {
      fail(std::string(st.status().message()), 1);
    } else if (restart_failed) {
      restartable[*st] = {spec, 0};
    }
  }
  for (int w = 0; w < *workers && exit_code == 0; ++w) {
    std::vector<std::string> a = {"--coordinator=" + endpoint, "--bind=tcp://127.0.0.1:0",
                                  absl::StrCat("--rank=", w)};
    a.insert(a.end(), all_args.begin(), all_args.end());
    a.insert(a.end(), worker_args.begin(), worker_args.end());
    for (const std::string& h : NodeHttpArgs(http_ports->worker_metrics, w)) a.push_back(h);
    if (!worker_cpus.empty()) a.push_back(worker_cpus);
    ChildSpec spec{absl::StrCat("worker ", w), bin + "/pstrain_worker", a};
    auto st = sup.Start(spec);
    if (!st.ok()) {
      fail(std::string(st.status().message()), 1);
    } else if (restart_failed && elastic && w != 0) {
      // Same rank: the coordinator re-admits it (not worker 0: a new worker 0
      // process is not taken back).
      restartable[*st] = {spec, 0};
    }
  }
  absl::Time job_done = absl::InfiniteFuture();
  while (exit_code == 0 && sup.AnyRunning()) {
    for (int i : sup.Pump(absl::Milliseconds(100), g_wake_pipe[0])) {
      const ChildState& c = sup.child(i);
      auto r = restartable.find(i);
      if (c.exit_code != 0 && exit_code == 0 && r != restartable.end() && job_done == absl::InfiniteFuture() &&
          max_restarts.ok() && r->second.second < *max_restarts) {
        auto [spec, restarts] = r->second;
        restartable.erase(r);
        Supervisor::Say(absl::StrCat(c.label, " exited with code ", c.exit_code, "; restarting it (",
                                     restarts + 1, " of ", *max_restarts, ")"));
        auto again = sup.Start(spec);
        if (!again.ok()) {
          fail(std::string(again.status().message()), 1);
        } else {
          restartable[*again] = {spec, restarts + 1};
        }
        continue;
      }
      // Worker 0 too: the coordinator hands its lead role on, or ends the
      // job (pipeline and allreduce modes) and then the launcher fails.
      if (c.exit_code >= 128 && exit_code == 0 && elastic && c.label.rfind("worker ", 0) == 0) {
        Supervisor::Say(absl::StrCat(c.label, " was killed (code ", c.exit_code,
                                     "); the job goes on without it (--elastic_workers)"));
        continue;
      }
      if (c.exit_code != 0 && exit_code == 0) {
        fail(absl::StrCat(c.label, " exited with code ", c.exit_code, "; stopping the cluster"), 1);
      } else if (i == *coord) {
        job_done = absl::Now();  // the others are being told to stop
      }
    }
    if (g_signal && exit_code == 0) fail(absl::StrCat("signal ", g_signal.load(), ": stopping the cluster"), 130);
    if (absl::Now() > deadline && exit_code == 0) fail("--timeout reached: stopping the cluster", 124);
    if (absl::Now() > job_done + absl::Seconds(20) && exit_code == 0) {
      std::string still;
      for (int i = 0; i < sup.size(); ++i) {
        if (sup.child(i).running) absl::StrAppend(&still, still.empty() ? "" : ", ", sup.child(i).label);
      }
      fail(absl::StrCat("processes still running 20 s after the job ended: ", still), 1);
    }
  }
  std::filesystem::remove_all(tmp);
  if (exit_code == 0) {
    Supervisor::Say("all processes finished");
    if (!metrics_out.empty()) {
      std::string summary = LastSummaryLine(metrics_out);
      if (!summary.empty()) Supervisor::Say("summary: " + summary);
    }
  }
  return exit_code;
}

}  // namespace pstrain::launcher
