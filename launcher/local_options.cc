#include "launcher/local_options.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/security/curve_keys.h"
#include "common/status.h"
#include "data/data_check.h"
#include "data/file_set.h"
#include "data/partition_stream.h"
#include "launcher/command.h"
#include "launcher/job_args.h"
#include "launcher/job_check.h"
#include "server/coordinator/checkpoint_manager.h"
#include "server/coordinator/coordinator.h"
#include "worker/training_loop.h"
#include "job/job_fields.h"

namespace pstrain::launcher {
namespace {

// Puts each of `rest` (flags local does not define) where it goes: a job
// field is in the job already; a node setting (LocalNodeFlags) goes to its
// processes as given and into `node` for the check. Anything else is an
// error naming the flag: a node setting local gives each process itself,
// or an unknown flag with the closest known name.
absl::Status Route(const std::vector<Arg>& rest, const FlagSet& local, LocalOptions* o,
                   std::vector<Arg>* node) {
  for (const Arg& a : rest) {
    std::string value;
    if (JobFieldOf(a, &value) != nullptr) continue;
    const NodeFlag* n = FindLocalNodeFlag(a.name);
    if (n == nullptr) {
      if (!job::NodeSettingReason(a.name).empty()) {
        return UsageError(absl::StrCat("--", a.name,
                                       ": pstrain local sets it for each process it starts"));
      }
      std::vector<std::string> known = local.names();
      for (const job::JobField& f : job::JobFields()) known.emplace_back(f.flag);
      for (const NodeFlag& f : LocalNodeFlags()) known.emplace_back(f.name);
      return UsageError(absl::StrCat("unknown flag --", a.name, DidYouMean(a.name, known)));
    }
    node->push_back(a);
    if (n->roles == job::kCoordinator) {
      o->coordinator_args.push_back(a.text);
    } else if (n->roles == job::kWorker) {
      o->worker_args.push_back(a.text);
    } else {
      o->common_args.push_back(a.text);
    }
  }
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

// The checkpoint the coordinator would restore (its --restore, --new_job),
// against the training data given now: a worker's position mid-epoch counts
// rows of the input it was taken on, so other input is refused here, before
// any process starts, as each worker would (worker/training_loop.h).
absl::Status CheckRestoredInputs(const server::CoordinatorOptions& co,
                                 const worker::WorkerOptions& w, int num_workers) {
  if (w.mode == TrainMode::kPipeline || w.train.train_data.empty()) return absl::OkStatus();
  server::CheckpointOptions restore = co.checkpoint;
  if (co.new_job && (restore.restore == "auto" || restore.restore == "latest")) {
    return absl::OkStatus();  // the old job is moved aside, nothing restored
  }
  auto manifest = server::CheckpointManager(restore).FindRestore();
  // A checkpoint that cannot be read is the coordinator's to report.
  if (!manifest.ok() || !*manifest || (*manifest)->num_workers != num_workers) {
    return absl::OkStatus();
  }
  auto files = worker::ExpandFilePatterns(w.train.train_data);
  if (!files.ok()) return absl::OkStatus();  // CheckData said so
  for (const proto::WorkerPosition& p : (*manifest)->workers) {
    if (p.rank < 0 || p.rank >= num_workers) continue;
    absl::Status st = worker::CheckResumeInputs(
        p, worker::DescribeInputs(*files, p.rank, num_workers), (*manifest)->step);
    if (!st.ok()) {
      return UsageError(absl::StrCat(st.message(), " (checkpoint ", (*manifest)->path, ")"));
    }
  }
  return absl::OkStatus();
}

// What the checked job means for the launcher (restarts, reruns, the
// layout of pipeline mode), and its data files.
absl::Status TakeCheckedJob(const CheckedJob& job, const FlagSet& local, LocalOptions* o) {
  const server::CoordinatorOptions& co = job.coordinator;
  o->elastic_workers = co.elastic_workers;
  o->recover_workers = co.recover_workers;
  o->journaled = !co.checkpoint.dir.empty();
  o->checkpoint_dir = co.checkpoint.dir;
  o->new_job = co.new_job;
  o->continue_job = co.continue_job;
  const worker::WorkerOptions& w = job.worker;
  o->epochs = w.train.epochs;
  o->metrics_out = w.train.metrics_out;
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
  PS_RETURN_IF_ERROR(CheckRestoredInputs(co, w, o->workers));
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

absl::StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& argv) {
  FlagSet flags = LocalFlags();
  absl::StatusOr<std::vector<Arg>> args = ParseArgs(argv);
  if (!args.ok()) return UsageError(args.status().message());
  // The job: the file's fields, the PSTRAIN_ variables and the command
  // line's job fields over them.
  PS_ASSIGN_OR_RETURN(LauncherJob job, ExpandJob(*args));
  absl::StatusOr<std::vector<Arg>> rest = flags.Take(job.args, /*keep_unknown=*/true);
  if (!rest.ok()) return UsageError(rest.status().message());
  LocalOptions o;
  PS_RETURN_IF_ERROR(TakeLocalFlags(flags, &o));
  std::vector<Arg> node;
  PS_RETURN_IF_ERROR(Route(*rest, flags, &o, &node));
  PS_ASSIGN_OR_RETURN(CheckedJob checked, CheckJob(job.spec, node));
  std::string auth, keys_dir;
  for (const Arg& a : node) {
    if (a.name == "auth") auth = a.value;
    if (a.name == "keys_dir") keys_dir = a.value;
  }
  if (auto keys = CurveKeysForAuth(auth, keys_dir); !keys.ok()) {
    return UsageError(keys.status().message());
  }
  PS_RETURN_IF_ERROR(TakeCheckedJob(checked, flags, &o));
  o.job_text = job.spec.ToJson();
  return o;
}

}  // namespace pstrain::launcher
