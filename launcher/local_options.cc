#include "launcher/local_options.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/security/curve_keys.h"
#include "common/status.h"
#include "data/data_check.h"
#include "data/partition_stream.h"
#include "launcher/command.h"
#include "launcher/job_args.h"
#include "launcher/worker_args.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/flags/coordinator_flags.h"

namespace pstrain::launcher {
namespace {

// Flags forwarded to every process.
const char* const kCommonFlags[] = {"log_level", "auth", "keys_dir"};

// A coordinator flag (forwarded to the coordinator, not the workers).
bool IsCoordinatorFlag(const std::string& name) {
  const auto& names = server::CoordinatorFlagNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The coordinator's options that the coordinator flags among `args` give,
// checked as pstrain_coordinator checks them; `o` gets --elastic_workers
// and whether the coordinator journals the job (the launcher restarts by
// them).
absl::Status CheckCoordinatorArgs(const std::vector<Arg>& args, LocalOptions* o) {
  std::vector<Arg> coordinator;
  for (const Arg& a : args) {
    if (IsCoordinatorFlag(a.name)) coordinator.push_back(a);
  }
  PS_ASSIGN_OR_RETURN(server::CoordinatorOptions co, CoordinatorOptionsFromArgs(coordinator));
  o->elastic_workers = co.elastic_workers;
  o->recover_workers = co.recover_workers;
  o->journaled = !co.checkpoint.dir.empty();
  o->checkpoint_dir = co.checkpoint.dir;
  o->new_job = co.new_job;
  o->continue_job = co.continue_job;
  return absl::OkStatus();
}

absl::Status CheckData(const std::vector<std::string>& patterns, const worker::Schema& schema,
                       const char* flag) {
  if (patterns.empty()) return absl::OkStatus();
  worker::DataCheckOptions o;
  o.flag = flag;
  absl::Status st = worker::CheckDataFiles(patterns, schema, o);
  return st.ok() ? st : UsageError(st.message());
}

// Routes each of `rest` (flags local does not define) to its processes;
// returns the workers' ones.
std::vector<Arg> Route(const std::vector<Arg>& rest, LocalOptions* o) {
  std::vector<Arg> worker;
  for (const Arg& a : rest) {
    if (IsCoordinatorFlag(a.name)) {
      o->coordinator_args.push_back(a.text);
      continue;
    }
    const bool common =
        std::find(std::begin(kCommonFlags), std::end(kCommonFlags), a.name) != std::end(kCommonFlags);
    worker.push_back(a);  // the common flags are the workers' too, checked with theirs
    if (common) {
      o->common_args.push_back(a.text);
      continue;
    }
    if (a.name == "metrics_out") o->metrics_out = a.value;
    o->worker_args.push_back(WorkerFlagText(a));
  }
  return worker;
}

// The workers' flags, checked as pstrain_worker checks them, and their data
// files; the layout they imply in pipeline mode.
absl::Status CheckWorkerArgs(std::vector<Arg> worker, const FlagSet& local, LocalOptions* o) {
  std::vector<std::string> other = ForwardedCoordinatorFlags();
  other.insert(other.end(), local.names().begin(), local.names().end());
  // The coordinator endpoint and ranks are the launcher's to give.
  worker.push_back(Arg{"coordinator", "tcp://127.0.0.1:1", true, ""});
  PS_ASSIGN_OR_RETURN(worker::WorkerOptions w, WorkerOptionsFromArgs(worker, other));
  o->epochs = w.train.epochs;
  if (o->recover_workers && w.mode != TrainMode::kPs) {
    return UsageError(absl::StrCat("--recover_workers is built for --mode=ps, not --mode=",
                                   TrainModeName(w.mode)));
  }
  if (w.mode == TrainMode::kPipeline) {
    const int needed = w.pipeline.stages * w.pipeline.replicas * w.pipeline.tensor_parallel;
    if (!local.IsSet("workers")) {
      o->workers = needed;
    } else if (o->workers != needed) {
      return UsageError(absl::StrCat("--workers=", o->workers,
                                     " but --replicas x --stages x --tensor_parallel = ", needed));
    }
  }
  PS_RETURN_IF_ERROR(CheckData(w.train.train_data, w.train.schema, "--train_data"));
  if (!w.train.train_stream.dir.empty()) {
    auto landed = worker::FirstPartitionFiles(w.train.train_stream, worker::kStreamPartitionsChecked);
    if (!landed.ok()) return UsageError(landed.status().message());
    PS_RETURN_IF_ERROR(CheckData(*landed, w.train.schema, "--train_stream"));
  }
  return CheckData(w.train.eval_data, w.train.schema, "--eval_data");
}

// Local's own numbers, in range.
absl::Status TakeLocalFlags(const FlagSet& flags, LocalOptions* o) {
  PS_ASSIGN_OR_RETURN(int64_t servers, flags.GetInt("servers"));
  PS_ASSIGN_OR_RETURN(int64_t workers, flags.GetInt("workers"));
  PS_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("server_threads"));
  PS_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("dashboard_port"));
  PS_ASSIGN_OR_RETURN(int64_t restarts, flags.GetInt("max_restarts"));
  PS_ASSIGN_OR_RETURN(o->timeout, flags.GetDouble("timeout"));
  if (servers < 1 || servers > 64) return UsageError("--servers must be in 1..64");
  if (workers < 1 || workers > 256) return UsageError("--workers must be in 1..256");
  if (threads < 1 || threads > 64) return UsageError("--server_threads must be in 1..64");
  if (port < 0 || port > 65535) return UsageError("--dashboard_port must be in 0..65535");
  if (restarts < 0) return UsageError("--max_restarts must be >= 0");
  if (o->timeout < 0) return UsageError("--timeout must be >= 0");
  o->servers = static_cast<int>(servers);
  o->workers = static_cast<int>(workers);
  o->server_threads = static_cast<int>(threads);
  o->dashboard_port = static_cast<int>(port);
  o->max_restarts = static_cast<int>(restarts);
  o->server_memory_budget = flags.Get("server_memory_budget");
  o->tier_dir = flags.Get("tier_dir");
  o->tier_store = flags.Get("tier_store");
  if (o->tier_store != "slots" && o->tier_store != "rocksdb") {
    return UsageError(absl::StrCat("--tier_store=", o->tier_store, ": want slots or rocksdb"));
  }
  if (!o->server_memory_budget.empty()) {
    auto bytes = ParseByteSize(o->server_memory_budget);
    if (!bytes.ok()) {
      return UsageError(absl::StrCat("--server_memory_budget: ", bytes.status().message()));
    }
    if (o->tier_dir.empty()) {
      return UsageError("--server_memory_budget needs --tier_dir: the folder for the rows past "
                        "the budget (each server keeps its own part there)");
    }
  } else if (!o->tier_dir.empty()) {
    return UsageError("--tier_dir needs --server_memory_budget");
  }
  o->bin_dir = flags.Get("bin_dir");
  o->metrics = flags.GetBool("metrics");
  o->dashboard = flags.GetBool("dashboard");
  o->restart_failed = flags.GetBool("restart_failed");
  o->pin_cpus = flags.GetBool("pin_cpus");
  PS_ASSIGN_OR_RETURN(int64_t v, flags.GetInt("v"));
  if (!flags.IsSet("v")) {
    if (const char* env = std::getenv("PSTRAIN_V"); env != nullptr && *env != '\0') {
      if (!absl::SimpleAtoi(env, &v)) return UsageError(absl::StrCat("PSTRAIN_V=", env, ": not a number"));
    }
  }
  if (v < 0 || v > 2) return UsageError(absl::StrCat("--v=", v, ": must be 0, 1 or 2"));
  o->verbosity = static_cast<int>(v);
  if (!o->bin_dir.empty() && !std::filesystem::is_directory(o->bin_dir)) {
    return UsageError("--bin_dir=" + o->bin_dir + ": not a folder");
  }
  return absl::OkStatus();
}

}  // namespace

FlagSet LocalFlags() {
  FlagSet flags;
  flags.Define("servers", "2", "Number of parameter servers.")
      .Define("workers", "2", "Number of workers.")
      .Define("bin_dir", "", "Folder with the pstrain_* binaries (default: next to pstrain).")
      .Define("timeout", "0", "Stop everything after this many seconds (0: no limit).")
      .Define("v", "0",
              "Verbosity. 0: what a person needs (progress, evaluations, warnings, errors, the "
              "result); 1: every line of every process as it wrote it (who joined, tables "
              "created, per-table statistics, ...); 2: also their debug lines. PSTRAIN_V sets it "
              "too.")
      .Define("metrics", "false", "Serve Prometheus /metrics from every process, on free ports (printed).")
      .Define("dashboard", "false", "Serve the coordinator's web dashboard on a free port (printed).")
      .Define("dashboard_port", "0", "Serve the dashboard on this port (0: see --dashboard).")
      .Define("restart_failed", "false",
              "Restart a server that dies (same rank); with --checkpoint_dir the cluster rolls back "
              "to the latest checkpoint and training goes on. With --elastic_workers, restart a "
              "worker (other than 0) that dies too: the coordinator re-admits it; with "
              "--recover_workers, any worker: the cluster rolls back to the checkpoint. With "
              "--checkpoint_dir, restart a coordinator that dies, on the same port: it takes the "
              "job back from its journal without a rollback.")
      .Define("max_restarts", "3", "With --restart_failed: restarts allowed per process.")
      .Define("server_threads", "1", "Executor threads per server (pstrain_server --server_threads).")
      .Define("server_memory_budget", "",
              "Memory per server for its tables, e.g. 1GB: sparse rows past it live on disk in "
              "--tier_dir (pstrain_server --server_memory_budget). Empty: all rows in RAM.")
      .Define("tier_dir", "", "Folder of the servers' disk tiers (with --server_memory_budget).")
      .Define("tier_store", "slots",
              "How the disk tiers store rows: slots (memory-mapped slot files) or rocksdb.")
      .Define("pin_cpus", "false",
              "Run the servers on one half of this machine's CPUs and the workers on the other "
              "(their --cpus), as if on two hosts: each reads what its I/O thread received from "
              "its own cache. Off: the scheduler places every process.")
      .Define("job", "",
              "A job file (JSON with comments; see docs/job-file.md and examples/jobs/): its "
              "fields are the flags of the same names, which the flags given here override. "
              "pstrain job show prints the resolved job.")
      .Define("help", "false", "Show this help.");
  return flags;
}

const std::vector<std::string>& ForwardedCoordinatorFlags() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const std::string& f : server::CoordinatorFlagNames()) {
      if (f != "servers" && f != "workers") v->push_back(f);  // local's own
    }
    for (const char* f : kCommonFlags) v->emplace_back(f);
    return v;
  }();
  return *names;
}

absl::StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& argv) {
  FlagSet flags = LocalFlags();
  absl::StatusOr<std::vector<Arg>> args = ParseArgs(argv);
  if (!args.ok()) return UsageError(args.status().message());
  // A job file's fields come first, as flags the command line overrides.
  PS_ASSIGN_OR_RETURN(LauncherJob job, ExpandJob(*args));
  absl::StatusOr<std::vector<Arg>> taken = flags.Take(job.args, /*keep_unknown=*/true);
  if (!taken.ok()) return UsageError(taken.status().message());
  std::vector<Arg> rest = *std::move(taken);
  LocalOptions o;
  o.job_text = job.spec.ToJson();
  PS_RETURN_IF_ERROR(TakeLocalFlags(flags, &o));
  PS_RETURN_IF_ERROR(CheckCoordinatorArgs(rest, &o));
  std::vector<Arg> worker = Route(rest, &o);
  std::string auth, keys_dir;
  for (const Arg& a : rest) {
    if (a.name == "auth") auth = a.value;
    if (a.name == "keys_dir") keys_dir = a.value;
  }
  if (auto keys = CurveKeysForAuth(auth, keys_dir); !keys.ok()) {
    return UsageError(keys.status().message());
  }
  PS_RETURN_IF_ERROR(CheckWorkerArgs(std::move(worker), flags, &o));
  return o;
}

}  // namespace pstrain::launcher
