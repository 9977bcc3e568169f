// pstrain local: a whole cluster on this machine. ParseLocalOptions checks
// every flag and the data first (launcher/local_options.h); LocalCluster
// then starts the processes and supervises them until the job ends.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/cpu_affinity.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/status.h"
#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/console.h"
#include "launcher/local_http.h"
#include "launcher/local_options.h"
#include "launcher/rerun.h"
#include "launcher/supervisor.h"

namespace pstrain::launcher {
namespace {

// How long the coordinator may take to start listening.
constexpr absl::Duration kCoordinatorStartTimeout = absl::Seconds(30);
// How often the coordinator's endpoint file is looked for.
constexpr absl::Duration kStartPoll = absl::Milliseconds(50);
// Grace of SIGTERM before SIGKILL when the cluster is stopped.
constexpr absl::Duration kStopGrace = absl::Seconds(5);
// After the coordinator ended the job, the others have this long to exit
// (they end within 10 s even when a teardown is stuck: ExitWithin).
constexpr absl::Duration kExitAfterJob = absl::Seconds(20);
// Supervision wakes at least this often (signals and exits wake it sooner).
constexpr absl::Duration kPumpInterval = absl::Milliseconds(100);

int g_wake_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};

std::string LastSummaryLine(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  std::string last;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::StrContains(line, "\"event\":\"summary\"")) last = std::string(line);
  }
  return last;
}

// One `pstrain local` run: the children, their restarts and the job's end.
// One thread drives it.
class LocalCluster {
 public:
  LocalCluster(const LocalOptions& o, std::string tmp)
      : o_(o), bin_(o.bin_dir.empty() ? BinaryDir() : o.bin_dir), tmp_(std::move(tmp)) {}

  // Starts the coordinator, then the servers and the workers.
  absl::Status Start();
  // Relays output and restarts what may be restarted until the job ends;
  // the error (exit code attached) when it fails, its reason already said.
  absl::Status Supervise();
  // Stops every child still running.
  void StopAll() { sup_.StopAll(kStopGrace); }

 private:
  absl::StatusOr<std::string> StartCoordinator();
  void PinHalves();
  absl::Status StartNodes(const std::string& endpoint);
  // Handles the exit of child `i`; an error ends the job.
  absl::Status OnExit(int i);
  absl::Status Fail(const std::string& why, int code);

  const LocalOptions& o_;
  const std::string bin_;
  const std::string tmp_;
  std::string job_arg_;  // "--job=FILE"
  Supervisor sup_;
  LocalHttpPorts http_;
  int coordinator_ = -1;
  std::string server_cpus_, worker_cpus_;  // "--cpus=..." with --pin_cpus
  // Children that may be restarted: index -> (spec, restarts so far).
  std::map<int, std::pair<ChildSpec, int>> restartable_;
  absl::Time job_done_ = absl::InfiniteFuture();
};

absl::Status LocalCluster::Fail(const std::string& why, int code) {
  Supervisor::Say(why);
  // What the others say as they are stopped is not news.
  Console::Get().Stopping();
  StopAll();
  return WithExitCode(absl::AbortedError(""), code);
}

absl::StatusOr<std::string> LocalCluster::StartCoordinator() {
  const std::string endpoint_file = tmp_ + "/coordinator";
  std::vector<std::string> args = {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + endpoint_file,
                                   absl::StrCat("--servers=", o_.servers),
                                   absl::StrCat("--workers=", o_.workers), job_arg_};
  args.insert(args.end(), o_.coordinator_args.begin(), o_.coordinator_args.end());
  args.insert(args.end(), o_.common_args.begin(), o_.common_args.end());
  for (const std::string& h : CoordinatorHttpArgs(http_)) args.push_back(h);
  PS_ASSIGN_OR_RETURN(coordinator_, sup_.Start({"coordinator", bin_ + "/pstrain_coordinator", args}));
  const absl::Time wait_until = absl::Now() + kCoordinatorStartTimeout;
  while (true) {
    sup_.Pump(kStartPoll, g_wake_pipe[0]);
    if (auto text = ReadFileToString(endpoint_file); text.ok() && !text->empty()) {
      std::string endpoint(absl::StripAsciiWhitespace(*text));
      if (o_.restart_failed && o_.journaled) {
        // A restarted coordinator listens where the nodes look for it and
        // takes the job back from its journal (in --checkpoint_dir).
        ChildSpec again{"coordinator", bin_ + "/pstrain_coordinator", args};
        again.args[0] = "--bind=" + endpoint;
        restartable_[coordinator_] = {again, 0};
      }
      return endpoint;
    }
    if (!sup_.child(coordinator_).running && sup_.child(coordinator_).exit_code == 0) {
      // It had nothing to do (the job in its --checkpoint_dir is finished).
      return std::string();
    }
    if (!sup_.child(coordinator_).running || absl::Now() > wait_until || g_signal) {
      return Fail("the coordinator did not start", 1);
    }
  }
}

// --pin_cpus: servers on the first half of the CPUs, workers on the rest.
void LocalCluster::PinHalves() {
  const CpuHalves halves = SplitAllowedCpus();
  if (halves.first.empty()) {
    Supervisor::Say("--pin_cpus: fewer than 2 CPUs, nothing pinned");
    return;
  }
  server_cpus_ = "--cpus=" + FormatCpuList(halves.first);
  worker_cpus_ = "--cpus=" + FormatCpuList(halves.second);
  Supervisor::Say(absl::StrCat("servers on CPUs ", server_cpus_.substr(7), ", workers on ",
                               worker_cpus_.substr(7)));
}

absl::Status LocalCluster::StartNodes(const std::string& endpoint) {
  if (o_.pin_cpus) PinHalves();
  for (int rank = 0; rank < o_.servers + o_.workers; ++rank) {
    const bool server = rank < o_.servers;
    const int r = server ? rank : rank - o_.servers;
    std::vector<std::string> a = {"--coordinator=" + endpoint, "--bind=tcp://127.0.0.1:0",
                                  absl::StrCat("--rank=", r), job_arg_};
    if (server) {
      a.push_back(absl::StrCat("--server_threads=", o_.server_threads));
      if (!o_.server_memory_budget.empty()) {
        a.push_back("--server_memory_budget=" + o_.server_memory_budget);
        a.push_back("--tier_dir=" + o_.tier_dir);
        a.push_back("--tier_store=" + o_.tier_store);
      }
    }
    a.insert(a.end(), o_.common_args.begin(), o_.common_args.end());
    if (!server) a.insert(a.end(), o_.worker_args.begin(), o_.worker_args.end());
    for (const std::string& h : NodeHttpArgs(server ? http_.server_metrics : http_.worker_metrics, r)) {
      a.push_back(h);
    }
    const std::string& cpus = server ? server_cpus_ : worker_cpus_;
    if (!cpus.empty()) a.push_back(cpus);
    ChildSpec spec{absl::StrCat(server ? "server " : "worker ", r),
                   bin_ + (server ? "/pstrain_server" : "/pstrain_worker"), a};
    absl::StatusOr<int> child = sup_.Start(spec);
    if (!child.ok()) return Fail(std::string(child.status().message()), 1);
    // A worker comes back with its rank and the coordinator re-admits it;
    // not worker 0: a new worker 0 process is not taken back.
    if (o_.restart_failed && (server || o_.recover_workers || (o_.elastic_workers && r != 0))) {
      restartable_[*child] = {spec, 0};
    }
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::Start() {
  // The checked job, which every process starts from (and the coordinator
  // hands to any other node that asks).
  const std::string job_file = tmp_ + "/job.json";
  PS_RETURN_IF_ERROR(WriteFileAtomically(job_file, o_.job_text + "\n"));
  job_arg_ = "--job=" + job_file;
  PS_ASSIGN_OR_RETURN(http_, PickLocalHttpPorts(o_.servers, o_.workers, o_.metrics, o_.dashboard,
                                                o_.dashboard_port));
  PS_ASSIGN_OR_RETURN(std::string endpoint, StartCoordinator());
  if (endpoint.empty()) {
    Supervisor::Say("the coordinator exited at once with nothing to do (see its last line)");
    return absl::OkStatus();
  }
  Supervisor::Say(absl::StrCat("coordinator at ", endpoint, "; starting ", o_.servers,
                               o_.servers == 1 ? " server and " : " servers and ", o_.workers,
                               o_.workers == 1 ? " worker" : " workers"));
  AnnounceHttpPorts(http_);
  return StartNodes(endpoint);
}

absl::Status LocalCluster::OnExit(int i) {
  const ChildState& c = sup_.child(i);
  auto r = restartable_.find(i);
  if (c.exit_code != 0 && r != restartable_.end() && job_done_ == absl::InfiniteFuture() &&
      r->second.second < o_.max_restarts) {
    auto [spec, restarts] = r->second;
    restartable_.erase(r);
    Supervisor::Say(absl::StrCat(c.label, " exited with code ", c.exit_code, "; restarting it (",
                                 restarts + 1, " of ", o_.max_restarts, ")"));
    absl::StatusOr<int> again = sup_.Start(spec);
    if (!again.ok()) return Fail(std::string(again.status().message()), 1);
    restartable_[*again] = {spec, restarts + 1};
    if (i == coordinator_) coordinator_ = *again;
    return absl::OkStatus();
  }
  // Worker 0 too: the coordinator hands its lead role on, or ends the job
  // (pipeline and allreduce modes) and then the launcher fails.
  if (c.exit_code >= 128 && o_.elastic_workers && c.label.rfind("worker ", 0) == 0) {
    Supervisor::Say(absl::StrCat(c.label, " was killed (code ", c.exit_code,
                                 "); the job goes on without it (--elastic_workers)"));
    return absl::OkStatus();
  }
  if (c.exit_code != 0) {
    // A usage error of a child is the invocation's: exit 2 like it.
    return Fail(absl::StrCat(c.label, " exited with code ", c.exit_code, "; stopping the cluster"),
                c.exit_code == 2 ? 2 : 1);
  }
  if (i == coordinator_) job_done_ = absl::Now();  // the others are being told to stop
  return absl::OkStatus();
}

absl::Status LocalCluster::Supervise() {
  const absl::Time deadline =
      o_.timeout > 0 ? absl::Now() + absl::Seconds(o_.timeout) : absl::InfiniteFuture();
  while (sup_.AnyRunning()) {
    for (int i : sup_.Pump(kPumpInterval, g_wake_pipe[0])) PS_RETURN_IF_ERROR(OnExit(i));
    if (g_signal) {
      return Fail(absl::StrCat(g_signal.load() == SIGINT ? "Ctrl-C" : absl::StrCat("signal ", g_signal.load()),
                               ": stopping the cluster"),
                  130);
    }
    if (absl::Now() > deadline) return Fail("--timeout reached: stopping the cluster", 124);
    if (absl::Now() > job_done_ + kExitAfterJob) {
      std::string still;
      for (int i = 0; i < sup_.size(); ++i) {
        if (sup_.child(i).running) absl::StrAppend(&still, still.empty() ? "" : ", ", sup_.child(i).label);
      }
      return Fail(absl::StrCat("processes still running ", absl::FormatDuration(kExitAfterJob),
                               " after the job ended: ", still),
                  1);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string LocalHelp() {
  return absl::StrCat(
      "usage: pstrain local [--servers=S] [--workers=W] [--flagfile=F] [coordinator flags] "
      "[worker flags]\n\n"
      "Starts a coordinator, S servers and W workers on 127.0.0.1 with free ports, prefixes\n"
      "their output with role and rank, and stops them all when the job ends, when one of\n"
      "them fails (exit code 1) or on Ctrl-C. Every flag and the data files are checked\n"
      "before anything starts (exit code 2).\n\n"
      "Every flag of a job (pstrain_worker --help, pstrain_coordinator --help: the sections\n"
      "named job:) may be given, alone or over a --job file's fields; pstrain job show prints\n"
      "the job that results. The job is checked once, as each process will read it, and every\n"
      "process starts from it. Of each process's own settings, --log_level, --auth and\n"
      "--keys_dir (see pstrain keygen) go to every process, --connect_timeout and\n"
      "--coordinator_timeout to the workers, --continue_job and --new_job to the coordinator;\n"
      "the others (endpoints, ranks, ports, CPUs) are local's to give.\n\n",
      LocalFlags().Help());
}

absl::Status RunLocal(const std::vector<std::string>& argv) {
  // The launcher's own log lines (the data checks) read like its others.
  spdlog::set_pattern("[pstrain] %v");
  PS_ASSIGN_OR_RETURN(LocalOptions options, ParseLocalOptions(argv));
  Console::Get().Configure(options.verbosity, isatty(STDOUT_FILENO) != 0);
  if (options.verbosity >= 2) options.common_args.push_back("--log_level=debug");
  absl::StatusOr<Rerun> rerun =
      DecideRerun(options.checkpoint_dir, options.epochs, options.new_job, options.continue_job);
  if (!rerun.ok()) return UsageError(rerun.status().message());
  if (rerun->action == Rerun::Action::kReport) {
    Supervisor::Say(rerun->message);
    return absl::OkStatus();
  }
  if (rerun->action == Rerun::Action::kContinue) {
    Supervisor::Say(rerun->message);
    options.coordinator_args.push_back("--continue_job");
  }
  char tmpl[] = "/tmp/pstrain-local-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return ErrnoToStatus(errno, "mkdtemp /tmp/pstrain-local-*");
  if (pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoToStatus(errno, "pipe2");
  HandleTerminationSignals([](int sig) {
    g_signal = sig;
    char c = 1;
    (void)!write(g_wake_pipe[1], &c, 1);
  });
  LocalCluster cluster(options, tmpl);
  absl::Status st = cluster.Start();
  if (st.ok()) st = cluster.Supervise();
  cluster.StopAll();
  std::filesystem::remove_all(tmpl);
  Console::Get().EndProgress();
  if (!st.ok()) return st;
  Console::Get().EndProgress();
  Supervisor::Say("all processes finished");
  if (!options.metrics_out.empty() && options.verbosity > 0) {
    std::string summary = LastSummaryLine(options.metrics_out);
    if (!summary.empty()) Supervisor::Say("summary: " + summary);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
