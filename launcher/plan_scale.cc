#include "launcher/plan_scale.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::launcher {
namespace {

using nlohmann::json;

constexpr double kIdBytes = 8;
constexpr double kFloatBytes = 4;

// A number field of `j` (nested with "a.b"), or `fallback`.
double Number(const json& j, const std::string& key, double fallback) {
  const json* at = &j;
  std::stringstream path(key);
  std::string part;
  while (std::getline(path, part, '.')) {
    if (!at->is_object() || !at->contains(part)) return fallback;
    at = &(*at)[part];
  }
  return at->is_number() ? at->get<double>() : fallback;
}

// CPU seconds per sample of `role` in a scale line: the steady window's
// when the line has it, else over the processes' lives.
double CpuPerSample(const json& line, const std::string& role) {
  const double window = Number(line, "window." + role + "_cpu_us_per_sample", -1);
  return (window > 0 ? window : Number(line, role + "_cpu_us_per_sample", 0)) * 1e-6;
}

}  // namespace

WireBytes PsWireBytes(double dense_floats, const std::vector<int>& sparse_dims, double u,
                      int batch_size, int servers) {
  double mean_dim = 0;
  for (int d : sparse_dims) mean_dim += d;
  if (!sparse_dims.empty()) mean_dim /= static_cast<double>(sparse_dims.size());
  const double b = std::max(1, batch_size);
  const double dense = kFloatBytes * dense_floats / b;
  const double headers = 2.0 * servers * kMessageOverheadBytes / b;  // a pull and a push per server
  WireBytes w;
  w.sent = u * (2 * kIdBytes + kFloatBytes * mean_dim) + dense + headers;
  w.received = u * kFloatBytes * mean_dim + dense + headers;
  return w;
}

double RingBytes(double dense_floats, int batch_size, int workers) {
  const double w = std::max(1, workers);
  return 2.0 * (w - 1) / w * kFloatBytes * dense_floats / std::max(1, batch_size);
}

int AllreduceSteps(int workers, bool ring) {
  if (workers <= 1) return 0;
  if (ring) return workers - 1;
  int steps = 0;
  while (workers % 2 == 0) {
    ++steps;
    workers /= 2;
  }
  return steps + workers - 1;
}

absl::StatusOr<ScalePrediction> PredictScale(const ScaleInputs& in) {
  if (in.workers < 1 || in.servers < 1) {
    return absl::InvalidArgumentError("--hosts and the servers must be >= 1");
  }
  if (in.host_cpus <= 0 || in.link_bytes_per_sec <= 0) {
    return absl::InvalidArgumentError("--host_cpus and --bandwidth must be > 0");
  }
  if (!(in.drift_allowance >= 0 && in.drift_allowance < 1)) {
    return absl::InvalidArgumentError("--drift_allowance must be in [0, 1)");
  }
  const HostSpeeds& s = in.speeds;
  if (s.worker_cpu_per_sample <= 0 || s.server_cpu_per_sample <= 0) {
    return absl::InvalidArgumentError(
        "no per-sample CPU speeds: give --calibration=FILE (bench/scale.py's lines) or "
        "--worker_us_per_sample and --server_us_per_sample");
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(in.model));
  // The dense floats the servers hold (ps mode) or the ring sums (allreduce).
  double dense_floats = 0, ring_floats = 0;
  std::vector<int> dims;
  for (const TableSpec& t : model->tables()) {
    if (t.kind != TableKind::kDense || t.on_workers) continue;
    (in.allreduce ? ring_floats : dense_floats) += static_cast<double>(t.size);
  }
  for (uint32_t id : model->sparse_tables()) dims.push_back(static_cast<int>(model->tables()[id].dim));

  ScalePrediction p;
  p.workers = in.workers;
  p.servers = in.servers;
  // u: given, or solved from the calibration's measured bytes (received =
  // u 4d + the rest), or every lookup (no id repeats within a batch).
  double u = in.unique_per_sample;
  if (u < 0 && s.worker_received > 0) {
    const WireBytes none = PsWireBytes(dense_floats, dims, 0, in.batch_size, s.calibration_servers);
    const WireBytes one = PsWireBytes(dense_floats, dims, 1, in.batch_size, s.calibration_servers);
    u = std::max(0.0, (s.worker_received - none.received) / (one.received - none.received));
  }
  if (u < 0) u = static_cast<double>(dims.size());
  p.unique_per_sample = u;
  // The servers' traffic mirrors the workers' less the ring's.
  const WireBytes ps = PsWireBytes(dense_floats, dims, u, in.batch_size, in.servers);
  p.ring_bytes = RingBytes(ring_floats, in.batch_size, in.workers);
  p.worker_bytes = WireBytes{ps.sent + p.ring_bytes, ps.received + p.ring_bytes};

  const double w = in.workers, n = in.servers, extra = n - 1;
  const double cpu = s.busy_fraction * in.host_cpus;
  // The workers' share of it: less the wait for peers (allreduce: a share
  // per peer; BSP, SSP: per doubling of W).
  double idle = 0;
  if (in.allreduce) {
    idle = (w - 1) * s.worker_wait_per_peer;
  } else if (in.synchronous) {
    idle = std::log2(w) * s.worker_wait_per_doubling;
  }
  const double worker_cpu = cpu * std::max(0.05, 1 - idle);
  const double steps = in.allreduce ? AllreduceSteps(in.workers, in.ring) : 0.0;
  const double c_w =
      s.worker_cpu_per_sample + extra * s.worker_cpu_per_server + steps * s.worker_cpu_per_ring;
  const double c_s = s.server_cpu_per_sample + extra * s.server_cpu_per_server;
  p.worker_cpu_bound = w * worker_cpu / c_w;
  p.server_cpu_bound = n * cpu / c_s;
  p.worker_link_bound =
      w * in.link_bytes_per_sec / std::max(p.worker_bytes.sent, p.worker_bytes.received);
  p.server_link_bound = n * in.link_bytes_per_sec / std::max(ps.sent, ps.received);
  const std::pair<double, const char*> bounds[] = {{p.worker_cpu_bound, "worker CPU"},
                                                   {p.server_cpu_bound, "server CPU"},
                                                   {p.worker_link_bound, "worker link"},
                                                   {p.server_link_bound, "server link"}};
  p.undrifted_samples_per_sec = std::numeric_limits<double>::infinity();
  for (const auto& [rate, name] : bounds) {
    if (rate < p.undrifted_samples_per_sec) {
      p.undrifted_samples_per_sec = rate;
      p.bottleneck = name;
    }
  }
  p.samples_per_sec = (1 - in.drift_allowance) * p.undrifted_samples_per_sec;
  // The one-host rate of the same inputs: the efficiency's denominator.
  const WireBytes one = PsWireBytes(dense_floats, dims, u, in.batch_size, 1);
  const double one_host =
      std::min({cpu / s.worker_cpu_per_sample, cpu / s.server_cpu_per_sample,
                in.link_bytes_per_sec / std::max(one.sent, one.received)});
  p.efficiency = p.undrifted_samples_per_sec / (w * one_host);
  return p;
}

absl::StatusOr<HostSpeeds> SpeedsFromScaleLines(const std::string& text, const std::string& rate,
                                                const std::string& model,
                                                TrainMode mode,
                                                const std::string& consistency) {
  const bool synchronous = mode == TrainMode::kAllreduce || consistency != "asp";
  std::optional<json> one, two;
  // Runs of >= 2 workers (allreduce, BSP, SSP), the cheapest of each layout,
  // keyed by (steps of the allreduce, servers): the steps tell ring from
  // bcube runs apart and grow with the workers.
  std::map<std::pair<int, int>, json> groups;
  double server_cpu = -1;  // the least of the one-host runs' servers
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  std::vector<json> matching;
  bool marked = false;  // some are calibration runs (bench/scale.py --calibrate)
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, " is not a JSON object (bench/scale.py prints one a line)"));
    }
    if (j.value("bench", "") != "scale" || j.value("mode", "ps") != TrainModeName(mode)) continue;
    if (!rate.empty() && j.value("rate", "") != rate) continue;
    if (!model.empty() && j.value("model", model) != model) continue;
    if (j.value("consistency", "asp") != consistency && mode == TrainMode::kPs) continue;
    marked = marked || j.value("calibration", false);
    matching.push_back(std::move(j));
  }
  // With calibration runs among them, only those: the points a sweep
  // measured after them are what the plan predicts, not what it learns from.
  for (const json& j : matching) {
    if (marked && !j.value("calibration", false)) continue;
    // Of several runs of a layout, the one whose worker spent the least a
    // sample (the server's cost is taken apart, below): the least slowed by
    // the VM's drift (15-30 % between runs).
    auto keep = [&](std::optional<json>& best) {
      if (!best || CpuPerSample(j, "worker") < CpuPerSample(*best, "worker")) best = j;
    };
    const int workers = static_cast<int>(Number(j, "workers", 0));
    if (workers >= 2 && synchronous) {
      const bool ring =
          j.value("model_flags", "").find("--allreduce_algorithm=ring") != std::string::npos;
      const std::pair<int, int> layout{AllreduceSteps(workers, ring),
                                       static_cast<int>(Number(j, "servers", 1))};
      auto it = groups.find(layout);
      if (it == groups.end() || CpuPerSample(j, "worker") < CpuPerSample(it->second, "worker")) {
        groups[layout] = j;
      }
    }
    if (workers != 1) continue;
    if (Number(j, "servers", 0) == 1) {
      keep(one);
      const double server = CpuPerSample(j, "server");
      if (server > 0 && (server_cpu < 0 || server < server_cpu)) server_cpu = server;
    }
    if (Number(j, "servers", 0) == 2) keep(two);
  }
  if (!one) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no one-host point (mode ", TrainModeName(mode), ", workers 1, servers 1",
        rate.empty() ? "" : ", rate " + rate, model.empty() ? "" : ", model " + model,
        ") in the calibration: run bench/scale.py --calibrate",
        mode == TrainMode::kPs ? "" : absl::StrCat(" --mode=", TrainModeName(mode)), " first"));
  }
  // Allreduce needs them (the collective's cost); BSP without them is
  // predicted as ASP.
  if (mode == TrainMode::kAllreduce && groups.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no point of two or more workers (mode allreduce", rate.empty() ? "" : ", rate " + rate,
        ") in the calibration: the collective's cost comes from them; run bench/scale.py "
        "--calibrate --mode=allreduce"));
  }
  HostSpeeds s;
  s.worker_cpu_per_sample = CpuPerSample(*one, "worker");
  s.server_cpu_per_sample = std::max(0.0, server_cpu);
  const double quota = Number(*one, "window.worker_cpu_of_quota",
                              Number(*one, "worker_cpu_of_quota", 1));
  s.busy_fraction = std::clamp(quota, 0.05, 1.0);
  s.host_cpus = Number(*one, "host_cpu", 0);
  s.worker_sent = Number(*one, "bytes_per_sample.worker.sent", 0);
  s.worker_received = Number(*one, "bytes_per_sample.worker.received", 0);
  s.source = absl::StrCat("one host at ", one->value("rate", "?"), ", ", s.host_cpus, " CPU");
  if (two) {
    // Its worker's extra CPU is the cost of a second server; its servers'
    // is not taken (see plan_scale.h).
    s.worker_cpu_per_server = std::max(0.0, CpuPerSample(*two, "worker") - s.worker_cpu_per_sample);
    absl::StrAppend(&s.source, ", and with 2 servers");
  }
  if (!groups.empty()) {
    // The slope of a worker's CPU (all workers' over the job's samples: each
    // worker's a sample of its own) over the steps of the allreduce, through
    // c_w at W = 1 (least squares): the longer run weighs more, so that a
    // few tenths of a microsecond of drift in a two-worker run are not
    // multiplied at W = 8.
    // The idle share over the peers waited for, likewise.
    // BSP and SSP: the idle share over log2 W instead (plan_scale.h).
    const bool per_doubling = mode != TrainMode::kAllreduce;
    double xy = 0, xx = 0, idle_xy = 0, idle_xx = 0;
    std::string layouts;
    for (const auto& [layout, line] : groups) {
      const double x = layout.first;
      const double y = CpuPerSample(line, "worker") - s.worker_cpu_per_sample -
                       (layout.second - 1) * s.worker_cpu_per_server;
      xy += x * y;
      xx += x * x;
      const double workers = Number(line, "workers", 1);
      const double peers = per_doubling ? std::log2(workers) : workers - 1;
      const double busy = Number(line, "window.worker_cpu_of_quota",
                                 Number(line, "worker_cpu_of_quota", s.busy_fraction));
      idle_xy += peers * (1 - std::min(1.0, busy / s.busy_fraction));
      idle_xx += peers * peers;
      absl::StrAppend(&layouts, layouts.empty() ? "" : ", ", Number(line, "workers", 0));
    }
    if (mode == TrainMode::kAllreduce) s.worker_cpu_per_ring = std::max(0.0, xy / xx);
    (per_doubling ? s.worker_wait_per_doubling : s.worker_wait_per_peer) =
        std::clamp(idle_xy / idle_xx, 0.0, 0.5);
    absl::StrAppend(&s.source, ", and ", layouts, " workers");
  }
  return s;
}

}  // namespace pstrain::launcher
