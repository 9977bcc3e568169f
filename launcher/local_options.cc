#include "launcher/local_options.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/security/curve_keys.h"
#include "common/status.h"
#include "launcher/command.h"
#include "launcher/worker_args.h"
#include "worker/data/data_check.h"

namespace pstrain::launcher {
namespace {

// A coordinator flag that `pstrain local` forwards, with the check of its
// value (the coordinator's own checks, made before it starts).
enum class Kind { kString, kBool, kInt, kDouble, kConsistency };
struct CoordinatorFlag {
  const char* name;
  Kind kind;
  double min;  // numbers: the smallest value allowed
};
constexpr CoordinatorFlag kCoordinatorFlags[] = {
    {"consistency", Kind::kConsistency, 0},     {"staleness", Kind::kInt, 0},
    {"heartbeat_interval", Kind::kDouble, 1e-3}, {"heartbeat_timeout", Kind::kDouble, 1e-3},
    {"join_timeout", Kind::kDouble, 1e-3},       {"dense_chunk", Kind::kInt, 1},
    {"checkpoint_dir", Kind::kString, 0},        {"checkpoint_every_steps", Kind::kInt, 0},
    {"checkpoint_every_secs", Kind::kDouble, 0}, {"keep_checkpoints", Kind::kInt, 1},
    {"restore", Kind::kString, 0},               {"recover_servers", Kind::kBool, 0},
    {"elastic_workers", Kind::kBool, 0},         {"worker_timeout", Kind::kDouble, 0},
    {"recovery_timeout", Kind::kDouble, 1e-3},
};
// Flags forwarded to every process.
const char* const kCommonFlags[] = {"log_level", "auth", "keys_dir"};

bool IsTrue(const std::string& v) { return v == "true" || v == "1" || v == "yes"; }

absl::Status CheckCoordinatorFlag(const CoordinatorFlag& f, const std::string& value) {
  const std::string where = absl::StrCat("--", f.name, "=", value);
  double number = 0;
  switch (f.kind) {
    case Kind::kString:
      return absl::OkStatus();
    case Kind::kConsistency:
      if (value == "asp" || value == "bsp" || value == "ssp") return absl::OkStatus();
      return UsageError(where + ": must be asp, bsp or ssp");
    case Kind::kBool:
      if (IsTrue(value) || value == "false" || value == "0" || value == "no") return absl::OkStatus();
      return UsageError(where + ": must be true or false");
    case Kind::kInt: {
      int64_t i = 0;
      if (!absl::SimpleAtoi(value, &i)) return UsageError(where + ": not an integer");
      number = static_cast<double>(i);
      break;
    }
    case Kind::kDouble:
      if (!absl::SimpleAtod(value, &number)) return UsageError(where + ": not a number");
      break;
  }
  if (number < f.min) return UsageError(absl::StrCat(where, ": must be >= ", f.min));
  return absl::OkStatus();
}

// Checks the coordinator flags among `args` and their combinations.
absl::Status CheckCoordinatorArgs(const std::vector<Arg>& args) {
  double interval = 1, timeout = 10, every_steps = 0, every_secs = 0;
  std::string dir;
  for (const Arg& a : args) {
    for (const CoordinatorFlag& f : kCoordinatorFlags) {
      if (a.name != f.name) continue;
      PS_RETURN_IF_ERROR(CheckCoordinatorFlag(f, a.value));
      if (a.name == "heartbeat_interval") (void)absl::SimpleAtod(a.value, &interval);
      if (a.name == "heartbeat_timeout") (void)absl::SimpleAtod(a.value, &timeout);
      if (a.name == "checkpoint_every_steps") (void)absl::SimpleAtod(a.value, &every_steps);
      if (a.name == "checkpoint_every_secs") (void)absl::SimpleAtod(a.value, &every_secs);
      if (a.name == "checkpoint_dir") dir = a.value;
    }
  }
  if (timeout <= interval) return UsageError("--heartbeat_timeout must exceed --heartbeat_interval");
  if (dir.empty() && (every_steps > 0 || every_secs > 0)) {
    return UsageError("--checkpoint_every_steps/--checkpoint_every_secs need --checkpoint_dir");
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

// Routes each of `rest` (flags local does not define) to its processes.
void Route(const std::vector<Arg>& rest, LocalOptions* o) {
  for (const Arg& a : rest) {
    bool used = false;
    for (const CoordinatorFlag& f : kCoordinatorFlags) {
      if (a.name != f.name) continue;
      o->coordinator_args.push_back(a.text);
      if (a.name == "elastic_workers") o->elastic_workers = IsTrue(a.value);
      used = true;
    }
    for (const char* f : kCommonFlags) {
      if (a.name != f) continue;
      o->common_args.push_back(a.text);
      used = true;
    }
    if (used) continue;
    if (a.name == "metrics_out") o->metrics_out = a.value;
    o->worker_args.push_back(a.text);
  }
}

// The workers' flags among `rest`, checked as pstrain_worker checks them,
// and their data files; the layout they imply in pipeline mode.
absl::Status CheckWorkerArgs(const std::vector<Arg>& rest, const FlagSet& local, LocalOptions* o) {
  std::vector<Arg> worker;
  std::vector<std::string> other = ForwardedCoordinatorFlags();
  other.insert(other.end(), local.names().begin(), local.names().end());
  for (const Arg& a : rest) {
    bool routed_elsewhere = false;
    for (const CoordinatorFlag& f : kCoordinatorFlags) routed_elsewhere |= a.name == f.name;
    if (!routed_elsewhere) worker.push_back(a);
  }
  // The coordinator endpoint and ranks are the launcher's to give.
  worker.push_back(Arg{"coordinator", "tcp://127.0.0.1:1", true, ""});
  PS_ASSIGN_OR_RETURN(worker::WorkerOptions w, WorkerOptionsFromArgs(worker, other));
  if (w.mode == "pipeline") {
    const int needed = w.pipeline.stages * w.pipeline.replicas * w.pipeline.tensor_parallel;
    if (!local.IsSet("workers")) {
      o->workers = needed;
    } else if (o->workers != needed) {
      return UsageError(absl::StrCat("--workers=", o->workers,
                                     " but --replicas x --stages x --tensor_parallel = ", needed));
    }
  }
  PS_RETURN_IF_ERROR(CheckData(w.train.train_data, w.train.schema, "--train_data"));
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
  o->bin_dir = flags.Get("bin_dir");
  o->metrics = flags.GetBool("metrics");
  o->dashboard = flags.GetBool("dashboard");
  o->restart_failed = flags.GetBool("restart_failed");
  o->pin_cpus = flags.GetBool("pin_cpus");
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
  return flags;
}

const std::vector<std::string>& ForwardedCoordinatorFlags() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const CoordinatorFlag& f : kCoordinatorFlags) v->emplace_back(f.name);
    for (const char* f : kCommonFlags) v->emplace_back(f);
    return v;
  }();
  return *names;
}

absl::StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& argv) {
  FlagSet flags = LocalFlags();
  PS_ASSIGN_OR_RETURN(std::vector<Arg> rest, flags.Parse(argv, /*keep_unknown=*/true));
  LocalOptions o;
  PS_RETURN_IF_ERROR(TakeLocalFlags(flags, &o));
  PS_RETURN_IF_ERROR(CheckCoordinatorArgs(rest));
  Route(rest, &o);
  std::string auth, keys_dir;
  for (const Arg& a : rest) {
    if (a.name == "auth") auth = a.value;
    if (a.name == "keys_dir") keys_dir = a.value;
  }
  if (auto keys = CurveKeysForAuth(auth, keys_dir); !keys.ok()) {
    return UsageError(keys.status().message());
  }
  PS_RETURN_IF_ERROR(CheckWorkerArgs(rest, flags, &o));
  return o;
}

}  // namespace pstrain::launcher
