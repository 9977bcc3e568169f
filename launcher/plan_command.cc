// pstrain plan: the layouts of pipeline mode (replicas x stages x
// tensor-parallel ranks, micro-batches) that fit a number of workers, with
// estimated memory per worker and traffic per step (launcher/
// plan_estimate.h); with --trial_steps, the best few run for a few steps
// under `pstrain local` on this machine, ranked by measured samples/s, with
// each one's peak worker memory (VmHWM) next to its estimate.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/byte_size.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/plan_estimate.h"
#include "launcher/plan_hosts.h"
#include "launcher/plan_memory.h"
#include "launcher/job_args.h"
#include "launcher/job_check.h"
#include "model/models/table_registry.h"
#include "worker/trainer.h"

extern char** environ;

namespace pstrain::launcher {
namespace {

// How often a trial's worker memory (VmHWM) is sampled.
constexpr absl::Duration kTrialPoll = absl::Milliseconds(50);

double Mb(double bytes) { return bytes / 1e6; }

// A /proc/<pid>/status field in kB, as bytes (-1 when unreadable).
double StatusBytes(pid_t pid, const std::string& field) {
  auto text = ReadFileToString(absl::StrCat("/proc/", pid, "/status"));
  if (!text.ok()) return -1;
  size_t at = text->find(field + ":");
  if (at == std::string::npos) return -1;
  return 1024.0 * std::strtod(text->c_str() + at + field.size() + 1, nullptr);
}

// The children of `parent` named `comm`.
std::vector<pid_t> ChildrenNamed(pid_t parent, const std::string& comm) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid)) continue;
    auto stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
    if (!stat.ok()) continue;
    size_t open = stat->find('('), close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (stat->substr(open + 1, close - open - 1) != comm) continue;
    int ppid = 0;
    if (std::sscanf(stat->c_str() + close + 2, "%*c %d", &ppid) == 1 && ppid == parent) {
      out.push_back(pid);
    }
  }
  return out;
}

struct TrialResult {
  int exit_code = -1;
  double samples_per_sec = -1;
  double peak = -1;  // largest worker VmHWM, bytes
  std::string log;
};

// Runs `pstrain local <args>`, polling its workers' peak memory until it ends.
TrialResult RunTrial(const std::string& bin, const std::vector<std::string>& args,
                     const std::string& log_path, absl::Duration timeout) {
  TrialResult r;
  std::vector<std::string> argv_s = {bin + "/pstrain", "local"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.log = absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc));
    return r;
  }
  std::map<pid_t, double> hwm;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    for (pid_t w : ChildrenNamed(pid, "pstrain_worker")) {
      const double v = StatusBytes(w, "VmHWM");
      if (v > 0) hwm[w] = std::max(hwm[w], v);
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (absl::Now() > deadline) {
      kill(pid, SIGINT);  // `pstrain local` stops its cluster
      waitpid(pid, &status, 0);
      break;
    }
    absl::SleepFor(kTrialPoll);
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (const auto& [w, v] : hwm) r.peak = std::max(r.peak, v);
  auto log = ReadFileToString(log_path);
  r.log = log.ok() ? *log : "";
  std::smatch m;
  static const std::regex kRate("samples/s=([0-9.]+)");
  if (std::regex_search(r.log, m, kRate)) r.samples_per_sec = std::stod(m[1]);
  return r;
}

std::string LastLines(const std::string& text, int n) {
  size_t at = text.size();
  for (int i = 0; i <= n && at != std::string::npos && at > 0; ++i) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

void PrintTable(const std::vector<LayoutEstimate>& layouts, const PlanInputs& in, bool trials) {
  std::printf("%-3s %-3s %-3s %-4s | %8s %8s %8s %8s %9s | %10s | %8s %8s %8s | %10s", "R", "P",
              "T", "M", "weights", "grads", "acts", "base", "mem/wkr", "opt/server", "pipe", "tp",
              "ps", "est samp/s");
  if (trials) std::printf(" | %10s %9s %6s", "samples/s", "peak", "err");
  std::printf("\n");
  for (const LayoutEstimate& e : layouts) {
    std::printf(
        "%-3d %-3d %-3d %-4d | %7.1fM %7.1fM %7.1fM %7.1fM %8.1fM | %9.1fM | %7.2fM %7.2fM "
        "%7.2fM | %10.0f",
        e.replicas, e.stages, e.tp, e.microbatches, Mb(e.weights), Mb(e.gradients),
        Mb(e.activations), Mb(e.baseline), Mb(e.total), Mb(e.optimizer_per_server),
        Mb(e.comm_pipeline), Mb(e.comm_tp), Mb(e.comm_ps), e.samples_per_sec);
    if (trials && e.measured_peak > 0) {
      std::printf(" | %10.0f %8.1fM %+5.1f%%", e.measured_samples_per_sec, Mb(e.measured_peak),
                  100.0 * (e.total - e.measured_peak) / e.measured_peak);
    } else if (trials && !e.trial_error.empty()) {
      std::printf(" | %s", e.trial_error.c_str());
    }
    if (!e.feasible) std::printf("  (infeasible: %s)", e.why_not.c_str());
    std::printf("\n");
  }
  std::printf(
      "\nR replicas x P stages x T tensor-parallel ranks = %d workers; M micro-batches (%s); "
      "batch %d rows per replica.\nMemory: per worker, the busiest one (weights = 3 copies of "
      "its dense tables, grads = 1 copy + stage 0's embedding rows and their gradients, acts = "
      "kept activations, base = process baseline); opt/server = optimizer state on each of %d "
      "servers.\nTraffic: MB per step sent + received by the "
      "busiest worker (pipe = activations between stages, tp = tensor-parallel all-reduces, "
      "ps = pulls + pushes).\n",
      in.workers, worker::ScheduleName(in.schedule), in.batch_size, in.servers);
}

std::string Json(const std::vector<LayoutEstimate>& layouts, const PlanInputs& in) {
  std::vector<std::string> rows;
  for (const LayoutEstimate& e : layouts) {
    std::string row = absl::StrFormat(
        "{\"replicas\":%d,\"stages\":%d,\"tensor_parallel\":%d,\"microbatches\":%d,"
        "\"feasible\":%s,\"memory_bytes\":{\"weights\":%.0f,\"gradients\":%.0f,"
        "\"activations\":%.0f,\"baseline\":%.0f,\"total\":%.0f,\"optimizer_per_server\":%.0f},"
        "\"comm_bytes_per_step\":{\"pipeline\":%.0f,\"tensor_parallel\":%.0f,\"ps\":%.0f,"
        "\"total\":%.0f},\"est_step_seconds\":%.6g,\"est_samples_per_sec\":%.6g",
        e.replicas, e.stages, e.tp, e.microbatches, e.feasible ? "true" : "false", e.weights,
        e.gradients, e.activations, e.baseline, e.total, e.optimizer_per_server, e.comm_pipeline,
        e.comm_tp, e.comm_ps, e.comm_total(), e.step_seconds, e.samples_per_sec);
    if (!e.feasible) absl::StrAppend(&row, ",\"why_not\":\"", e.why_not, "\"");
    if (e.measured_peak > 0) {
      absl::StrAppend(&row, absl::StrFormat(",\"measured_samples_per_sec\":%.6g,"
                                            "\"measured_peak_bytes\":%.0f,\"memory_error\":%.4f",
                                            e.measured_samples_per_sec, e.measured_peak,
                                            (e.total - e.measured_peak) / e.measured_peak));
    }
    rows.push_back(row + "}");
  }
  return absl::StrFormat(
      "{\"model\":\"%s\",\"workers\":%d,\"servers\":%d,\"batch_size\":%d,\"schedule\":\"%s\","
      "\"flops_per_worker\":%.6g,\"bandwidth_bytes\":%.6g,\"baseline_bytes\":%.0f,"
      "\"layouts\":[%s]}",
      in.model.name, in.workers, in.servers, in.batch_size, worker::ScheduleName(in.schedule),
      in.flops_per_worker, in.bandwidth_bytes, in.baseline_bytes, absl::StrJoin(rows, ","));
}

FlagSet PlanFlags() {
  FlagSet flags;
  flags.Define("workers", "", "Workers to lay out (required).")
      .Define("servers", "2", "Parameter servers (of the trial runs; spreads the optimizer state).")
      .Define("consistency", "bsp", "Consistency of the trial runs.")
      .Define("device_memory", "0",
              "GB of memory per worker; larger layouts are infeasible (0: no limit).")
      .Define("bandwidth", "1",
              "Link rate of each worker (and, with --hosts, each host's link, each way): GB/s, "
              "or with a unit: 10gbit, 1gbit, 100mbit.")
      .Define("hosts", "",
              "Predict ps mode on this many worker hosts (W = 1, 2, 4, ... up to it) instead of "
              "listing pipeline layouts; needs per-sample speeds (--calibration or --*_us_per_sample).")
      .Define("host_cpus", "1", "With --hosts: CPUs of each host.")
      .Define("servers_per_worker", "0.5",
              "With --hosts: server hosts = max(1, W x this); --servers sets them at W = --hosts.")
      .Define("calibration", "",
              "With --hosts: bench/scale.py's JSON lines measured on one host (workers 1 with "
              "servers 1, and with servers 2 for the cost of each extra server: "
              "`bench/scale.py --calibrate`).")
      .Define("calibration_rate", "",
              "With --hosts: use the calibration's lines at this link rate (e.g. 10gbit).")
      .Define("worker_us_per_sample", "0", "With --hosts: a worker's CPU us per sample (S = 1).")
      .Define("server_us_per_sample", "0", "With --hosts: the servers' CPU us per sample.")
      .Define("worker_us_per_extra_server", "0",
              "With --hosts: a worker's extra CPU us per sample for each server beyond one.")
      .Define("drift_allowance", "0.1",
              "With --hosts: predict this share below the least bound, for the drift between "
              "runs (0.1: nine in ten calibration pairs differed by less; 0: the undrifted bound).")
      .Define("unique_per_sample", "-1",
              "With --hosts: distinct (table, id) pairs per sample after a batch's dedup (-1: "
              "from the calibration's bytes, else every lookup).")
      .Define("server_memory", "",
              "Size the parameter servers: the bytes of each table of the model (rows x dim x "
              "bytes a value x (1 + optimizer state) + index) and how many servers of this "
              "memory (e.g. 64GiB) hold them. Alone, or before --workers's or --hosts's plan.")
      .Define("server_headroom", "0.25",
              "With --server_memory: the share of each server's memory kept free.")
      .Define("rows", "",
              "With --server_memory: the distinct ids expected in each sparse table (e.g. 50M); "
              "needed for tables with unbounded ids, and used when smaller than the hash buckets.")
      .Define("trial_steps", "0",
              "Run the best layouts for this many steps and rank them by samples/s.")
      .Define("trial_layouts", "3", "How many layouts the trial runs.")
      .Define("trial_timeout", "600", "Seconds one trial may take.")
      .Define("baseline_mb", "24",
              "Memory of a worker process before its model, when not measured.")
      .Define("json", "false", "Print JSON instead of the table.")
      .Define("bin_dir", "", "Folder with the pstrain binaries (default: next to pstrain).")
      .Define("help", "false", "Show this help.");
  return flags;
}

// What `pstrain plan` was asked: the estimate's inputs and the trials.
struct PlanRequest {
  PlanInputs in;
  int64_t trial_steps = 0;
  int64_t trial_layouts = 3;
  absl::Duration trial_timeout;
  std::string bin;
  bool json = false;
  std::vector<std::string> trial_args;  // `pstrain local` flags of every trial
};

// The estimate's inputs from the worker flags among `rest`.
// `worker`, when given, gets all the worker flags' options.
absl::Status TakeModel(const std::vector<Arg>& rest, const FlagSet& flags, PlanInputs* in,
                       worker::WorkerOptions* worker = nullptr) {
  // The worker flags require --train_data; only the trials read it, and a
  // --schema, whose column names and statistics come from the files.
  const auto given = [&rest](const char* name) {
    return std::any_of(rest.begin(), rest.end(),
                       [name](const Arg& a) { return a.name == name && !a.value.empty(); });
  };
  if (given("schema") && !given("train_data")) {
    return UsageError(
        "--schema needs --train_data too: the schema's column names (a header line) and "
        "statistics (standardize) come from the data files");
  }
  // The job of those flags (and a --job among them), checked as the
  // workers will read it; node settings (--log_level, ...) as in local.
  PS_ASSIGN_OR_RETURN(LauncherJob job, ExpandJob(rest));
  std::vector<Arg> node;
  for (const Arg& a : job.args) {
    std::string value;
    if (JobFieldOf(a, &value) != nullptr) continue;
    if (FindLocalNodeFlag(a.name) != nullptr) {
      node.push_back(a);
      continue;
    }
    std::vector<std::string> known = flags.names();
    for (const job::JobField& f : job::JobFields()) known.emplace_back(f.flag);
    return UsageError(absl::StrCat("unknown flag --", a.name, DidYouMean(a.name, known)));
  }
  if (job.spec.Find("train_data") == nullptr) {
    job.spec.Set(*job::FieldOfFlag("train_data"), "(none)", job::Source::kDefault, "");
  }
  PS_ASSIGN_OR_RETURN(CheckedJob checked, CheckJob(job.spec, node));
  const worker::WorkerOptions& options = checked.worker;
  in->model = options.train.model;
  in->model.device = "cpu";  // pipeline mode computes on the CPU
  in->batch_size = options.train.batch_size;
  in->schedule = options.pipeline.schedule;
  in->stage_layers = options.pipeline.stage_layers;
  if (worker != nullptr) *worker = options;
  return absl::OkStatus();
}

absl::StatusOr<PlanRequest> ParsePlanRequest(const std::vector<std::string>& argv) {
  FlagSet flags = PlanFlags();
  PS_ASSIGN_OR_RETURN(std::vector<Arg> rest, flags.Parse(argv, /*keep_unknown=*/true));
  PlanRequest r;
  PS_ASSIGN_OR_RETURN(int64_t workers, flags.GetInt("workers"));
  PS_ASSIGN_OR_RETURN(int64_t servers, flags.GetInt("servers"));
  PS_ASSIGN_OR_RETURN(double device_memory, flags.GetDouble("device_memory"));
  PS_ASSIGN_OR_RETURN(double bandwidth, ParseLinkRate(flags.Get("bandwidth")));
  PS_ASSIGN_OR_RETURN(r.trial_steps, flags.GetInt("trial_steps"));
  PS_ASSIGN_OR_RETURN(r.trial_layouts, flags.GetInt("trial_layouts"));
  PS_ASSIGN_OR_RETURN(double trial_timeout, flags.GetDouble("trial_timeout"));
  PS_ASSIGN_OR_RETURN(double baseline_mb, flags.GetDouble("baseline_mb"));
  if (workers < 1 || servers < 1) return UsageError("--workers and --servers must be >= 1");
  PS_RETURN_IF_ERROR(TakeModel(rest, flags, &r.in));
  const bool has_data = std::any_of(rest.begin(), rest.end(), [](const Arg& a) {
    return a.name == "train_data" && !a.value.empty();
  });
  if (r.trial_steps > 0 && !has_data) return UsageError("--trial_steps needs --train_data");
  r.in.workers = static_cast<int>(workers);
  r.in.servers = static_cast<int>(servers);
  r.in.device_memory_bytes = device_memory * 1e9;
  r.in.bandwidth_bytes = bandwidth;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  r.in.flops_per_worker = MeasureFlops() * std::min(1.0, static_cast<double>(cores) / r.in.workers);
  r.in.baseline_bytes = baseline_mb * 1e6;
  r.trial_timeout = absl::Seconds(trial_timeout);
  r.bin = flags.Get("bin_dir").empty() ? BinaryDir() : flags.Get("bin_dir");
  r.json = flags.GetBool("json");
  r.trial_args = {absl::StrCat("--servers=", servers), "--consistency=" + flags.Get("consistency"),
                  "--mode=pipeline"};
  for (const Arg& a : rest) r.trial_args.push_back(a.text);
  for (const char* f : {"--eval_data=", "--eval_meta=", "--metrics_out=", "--save_model=",
                        "--log_every_secs=100000"}) {
    r.trial_args.push_back(f);
  }
  r.trial_args.push_back(absl::StrCat("--max_steps=", r.trial_steps));
  return r;
}

// The baseline: one step of a one-layer tower on the same data; its peak
// memory replaces --baseline_mb.
void MeasureBaseline(PlanRequest& r, const std::string& tmp) {
  std::vector<std::string> a = r.trial_args;
  for (const char* f :
       {"--model=deep_tower", "--tower_layers=1", "--tower_width=8", "--stages=1", "--replicas=1",
        "--tensor_parallel=1", "--microbatches=1", "--stage_layers=", "--max_steps=1"}) {
    a.push_back(f);
  }
  TrialResult base = RunTrial(r.bin, a, tmp + "/baseline.log", r.trial_timeout);
  if (base.exit_code == 0 && base.peak > 0) {
    r.in.baseline_bytes = base.peak;
    if (!r.json) std::printf("measured worker baseline: %.1f MB\n", Mb(base.peak));
  } else {
    std::fprintf(stderr, "pstrain plan: the baseline run failed (exit %d):\n%s\n", base.exit_code,
                 LastLines(base.log, 10).c_str());
  }
}

// Runs the best --trial_layouts feasible layouts; the measured ones first,
// fastest first.
void RunTrials(const PlanRequest& r, const std::string& tmp, std::vector<LayoutEstimate>& layouts) {
  int tried = 0;
  for (LayoutEstimate& e : layouts) {
    if (tried >= r.trial_layouts || !e.feasible) break;
    ++tried;
    std::vector<std::string> a = r.trial_args;
    a.push_back(absl::StrCat("--replicas=", e.replicas));
    a.push_back(absl::StrCat("--stages=", e.stages));
    a.push_back(absl::StrCat("--tensor_parallel=", e.tp));
    a.push_back(absl::StrCat("--microbatches=", e.microbatches));
    if (std::count(r.in.stage_layers.begin(), r.in.stage_layers.end(), ',') + 1 != e.stages) {
      a.push_back("--stage_layers=");
    }
    const std::string name =
        absl::StrCat("R", e.replicas, "P", e.stages, "T", e.tp, "M", e.microbatches);
    if (!r.json) {
      std::printf("trial %s: %lld steps...\n", name.c_str(), static_cast<long long>(r.trial_steps));
      std::fflush(stdout);
    }
    TrialResult t = RunTrial(r.bin, a, tmp + "/" + name + ".log", r.trial_timeout);
    if (t.exit_code == 0 && t.samples_per_sec >= 0) {
      e.measured_samples_per_sec = t.samples_per_sec;
      e.measured_peak = t.peak;
    } else {
      e.trial_error = absl::StrCat("trial failed (exit ", t.exit_code, ")");
      std::fprintf(stderr, "pstrain plan: trial %s failed:\n%s\n", name.c_str(),
                   LastLines(t.log, 10).c_str());
    }
  }
  std::stable_sort(layouts.begin(), layouts.end(),
                   [](const LayoutEstimate& a, const LayoutEstimate& b) {
                     return a.measured_samples_per_sec > b.measured_samples_per_sec;
                   });
}

}  // namespace

std::string PlanHelp() {
  return absl::StrCat(
      "usage: pstrain plan --workers=N [--device_memory=GB] [--bandwidth=GBps] "
      "[--trial_steps=K] [--json] [worker flags: --model, --batch_size, ... or "
      "--flagfile=F]\n"
      "       pstrain plan --hosts=N --host_cpus=C --bandwidth=10gbit "
      "--calibration=scale.jsonl [--model=..., --batch_size=...]\n"
      "       pstrain plan --server_memory=64GiB [--rows=N] [--json] [worker flags: --model, "
      "--hash_buckets, --embedding_dim, --optimizer, --embedding_dtype, --max_rows, ...]\n\n"
      "With --server_memory: the bytes of each table on the parameter servers (rows x dim x "
      "bytes a value x (1 + optimizer state) + the index), in total, and how many servers of "
      "that memory hold them with --server_headroom kept free.\nLists the layouts of "
      "--mode=pipeline (R x P x T workers, M micro-batches) with estimated memory and traffic; "
      "with --trial_steps, runs the best under `pstrain local`.\nWith --hosts: predicts "
      "samples/s and scaling efficiency of ps mode on 1, 2, 4, ... N worker hosts (and "
      "max(1, W/2) server hosts) from per-sample speeds measured on one host "
      "(`bench/scale.py --calibrate` writes them), naming the "
      "bottleneck of each; with --mode=allreduce, of allreduce mode (its calibration also "
      "measures two and four workers: `bench/scale.py --calibrate --mode=allreduce`).\n\n",
      PlanFlags().Help());
}

// --hosts: the ps-mode scaling prediction instead of the layouts.
absl::StatusOr<HostsPlanRequest> ParseHostsRequest(const FlagSet& flags,
                                                   const std::vector<Arg>& rest) {
  HostsPlanRequest h;
  PlanInputs in;
  worker::WorkerOptions worker;
  PS_RETURN_IF_ERROR(TakeModel(rest, flags, &in, &worker));
  h.mode = worker.mode;
  h.allreduce_ring = worker.allreduce_algorithm == "ring";
  // The trials' default (bsp) is not the hosts plan's: asp unless given.
  if (flags.IsSet("consistency")) h.consistency = flags.Get("consistency");
  if (h.consistency != "asp" && h.consistency != "bsp" && h.consistency != "ssp") {
    return UsageError(absl::StrCat("--consistency=", h.consistency, ": expected asp, bsp or ssp"));
  }
  if (h.mode == TrainMode::kPipeline) {
    return UsageError(absl::StrCat("--hosts predicts --mode=ps and --mode=allreduce, not --mode=",
                                   TrainModeName(h.mode), " (pstrain plan without --hosts lists its layouts)"));
  }
  h.model = in.model;
  h.batch_size = in.batch_size;
  PS_ASSIGN_OR_RETURN(int64_t hosts, flags.GetInt("hosts"));
  if (hosts < 1 || hosts > 4096) return UsageError("--hosts must be between 1 and 4096");
  h.hosts = static_cast<int>(hosts);
  if (flags.IsSet("servers")) {
    PS_ASSIGN_OR_RETURN(int64_t servers, flags.GetInt("servers"));
    if (servers < 1) return UsageError("--servers must be >= 1");
    h.servers = static_cast<int>(servers);
  }
  PS_ASSIGN_OR_RETURN(h.servers_per_worker, flags.GetDouble("servers_per_worker"));
  PS_ASSIGN_OR_RETURN(h.host_cpus, flags.GetDouble("host_cpus"));
  if (!(h.host_cpus > 0)) return UsageError("--host_cpus must be > 0");
  if (!(h.servers_per_worker > 0)) return UsageError("--servers_per_worker must be > 0");
  PS_ASSIGN_OR_RETURN(h.link_bytes_per_sec, ParseLinkRate(flags.Get("bandwidth")));
  PS_ASSIGN_OR_RETURN(h.worker_us_per_sample, flags.GetDouble("worker_us_per_sample"));
  PS_ASSIGN_OR_RETURN(h.server_us_per_sample, flags.GetDouble("server_us_per_sample"));
  PS_ASSIGN_OR_RETURN(h.worker_us_per_extra_server, flags.GetDouble("worker_us_per_extra_server"));
  PS_ASSIGN_OR_RETURN(h.unique_per_sample, flags.GetDouble("unique_per_sample"));
  PS_ASSIGN_OR_RETURN(h.drift_allowance, flags.GetDouble("drift_allowance"));
  if (!(h.drift_allowance >= 0 && h.drift_allowance < 1)) {
    return UsageError(absl::StrCat("--drift_allowance=", flags.Get("drift_allowance"),
                                   ": expected a share in [0, 1), e.g. 0.1"));
  }
  h.calibration = flags.Get("calibration");
  h.calibration_rate = flags.Get("calibration_rate");
  if (h.calibration.empty() && (h.worker_us_per_sample <= 0 || h.server_us_per_sample <= 0)) {
    return UsageError(
        "--hosts needs per-sample speeds measured on one host: --calibration=FILE (the lines of "
        "`bench/scale.py --calibrate`) or --worker_us_per_sample and --server_us_per_sample");
  }
  h.json = flags.GetBool("json");
  return h;
}

// --server_memory: the tables' sizing (launcher/plan_memory.h).
absl::Status RunMemoryPlan(const FlagSet& flags, const std::vector<Arg>& rest) {
  const std::string memory_text = flags.Get("server_memory");
  absl::StatusOr<uint64_t> memory = ParseByteSize(memory_text);
  if (!memory.ok() || *memory == 0) {
    return UsageError(absl::StrCat("--server_memory=", memory_text,
                                   ": expected a size like 64GiB (K, M, G, T: powers of 1024)"));
  }
  PS_ASSIGN_OR_RETURN(double headroom, flags.GetDouble("server_headroom"));
  if (!(headroom >= 0 && headroom < 1)) {
    return UsageError(absl::StrCat("--server_headroom=", flags.Get("server_headroom"),
                                   ": expected a share in [0, 1), e.g. 0.25"));
  }
  uint64_t expected = 0;
  if (!flags.Get("rows").empty()) {
    absl::StatusOr<uint64_t> rows = ParseRowCount("rows", flags.Get("rows"));
    if (!rows.ok()) return UsageError(rows.status().message());
    expected = *rows;
  }
  PlanInputs in;
  worker::WorkerOptions worker;
  PS_RETURN_IF_ERROR(TakeModel(rest, flags, &in, &worker));
  absl::StatusOr<std::unique_ptr<worker::Model>> model = worker::CreateModel(in.model);
  if (!model.ok()) return UsageError(model.status().message());
  // The tables as the job creates them: its optimizers, dtype, eviction.
  std::vector<TableSpec> tables = (*model)->tables();
  worker::ApplyLrSchedule(worker.train, 1, &tables);
  // Each field's hash buckets under the name its tables carry (emb.carrier).
  std::map<std::string, uint64_t> buckets;
  for (int f = 0; f < worker.train.model.num_sparse; ++f) {
    buckets[worker::SparseFieldName(worker.train.model, f)] =
        worker.train.schema.num_sparse > f ? FieldBuckets(worker.train.schema, f)
                                           : worker.train.schema.hash_buckets;
  }
  std::vector<TableRows> rows(tables.size());
  for (TableSpec& t : tables) {
    if (t.kind == TableKind::kDense) {
      t.on_workers = t.on_workers || worker.mode == TrainMode::kAllreduce;
      continue;
    }
    absl::StatusOr<TableRows> r = RowsOfTable(t, buckets, expected);
    if (!r.ok()) return UsageError(r.status().message());
    rows[t.id] = *r;
  }
  absl::StatusOr<MemoryPlan> plan = PlanServerMemory(tables, rows, static_cast<double>(*memory), headroom);
  if (!plan.ok()) return UsageError(plan.status().message());
  if (flags.GetBool("json")) {
    std::printf("%s\n", MemoryPlanJson(*plan, worker.train.model.name).c_str());
  } else {
    std::printf("%s\n", MemoryPlanText(*plan, worker.train.model.name).c_str());
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status RunPlan(const std::vector<std::string>& argv) {
  {
    FlagSet flags = PlanFlags();
    PS_ASSIGN_OR_RETURN(std::vector<Arg> rest, flags.Parse(argv, /*keep_unknown=*/true));
    if (flags.IsSet("server_memory")) {
      PS_RETURN_IF_ERROR(RunMemoryPlan(flags, rest));
      if (!flags.IsSet("hosts") && !flags.IsSet("workers")) return absl::OkStatus();
    }
    if (flags.IsSet("hosts")) {
      PS_ASSIGN_OR_RETURN(HostsPlanRequest h, ParseHostsRequest(flags, rest));
      InitLogging("plan", "warn");
      return RunHostsPlan(h);
    }
  }
  PS_ASSIGN_OR_RETURN(PlanRequest r, ParsePlanRequest(argv));
  InitLogging("plan", "warn");
  std::string tmp;
  if (r.trial_steps > 0) {
    char tmpl[] = "/tmp/pstrain-plan-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return ErrnoToStatus(errno, "mkdtemp /tmp/pstrain-plan-*");
    tmp = tmpl;
    MeasureBaseline(r, tmp);
  }
  absl::StatusOr<std::vector<LayoutEstimate>> layouts = EstimateLayouts(r.in);
  if (!layouts.ok()) return UsageError(layouts.status().message());
  if (r.trial_steps > 0) {
    RunTrials(r, tmp, *layouts);
    std::filesystem::remove_all(tmp);
  }
  if (r.json) {
    std::printf("%s\n", Json(*layouts, r.in).c_str());
  } else {
    PrintTable(*layouts, r.in, r.trial_steps > 0);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
