// pstrain plan --hosts=N: the predicted samples/s and scaling efficiency of
// ps (or allreduce) mode on N worker hosts (launcher/plan_scale.h), for W = 1, 2, 4, ...
// up to N, from per-sample speeds measured on one host.
#include "launcher/plan_hosts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"
#include "launcher/command.h"
#include "launcher/plan_scale.h"

namespace pstrain::launcher {
namespace {

// The servers of W worker hosts: max(1, floor(W x per_worker)), as bench/scale.py.
int ServersFor(int workers, double per_worker) {
  return std::max(1, static_cast<int>(std::floor(workers * per_worker + 1e-9)));
}

std::string Json(const ScalePrediction& p, const ScaleInputs& in) {
  return absl::StrFormat(
      "{\"plan\":\"hosts\",\"mode\":\"%s\",\"model\":\"%s\",\"batch_size\":%d,\"workers\":%d,"
      "\"servers\":%d,"
      "\"host_cpus\":%.6g,\"link_bytes_per_sec\":%.6g,\"predicted_samples_per_sec\":%.6g,"
      "\"undrifted_samples_per_sec\":%.6g,\"drift_allowance\":%.3f,"
      "\"predicted_efficiency\":%.4f,\"bottleneck\":\"%s\",\"bounds\":{\"worker_cpu\":%.6g,"
      "\"server_cpu\":%.6g,\"worker_link\":%.6g,\"server_link\":%.6g},"
      "\"bytes_per_sample\":{\"worker\":{\"sent\":%.1f,\"received\":%.1f},"
      "\"server\":{\"sent\":%.1f,\"received\":%.1f}},\"ring_bytes_per_sample\":%.1f,"
      "\"unique_per_sample\":%.3f,"
      "\"speeds\":{\"worker_cpu_us_per_sample\":%.4g,\"server_cpu_us_per_sample\":%.4g,"
      "\"worker_us_per_extra_server\":%.4g,\"server_us_per_extra_server\":%.4g,"
      "\"worker_us_per_ring\":%.4g,\"worker_wait_per_peer\":%.4f,"
      "\"worker_wait_per_doubling\":%.4f,"
      "\"busy_fraction\":%.3f}}",
      in.allreduce ? "allreduce" : "ps", in.model.name, in.batch_size, p.workers, p.servers,
      in.host_cpus, in.link_bytes_per_sec, p.samples_per_sec, p.undrifted_samples_per_sec,
      in.drift_allowance, p.efficiency, p.bottleneck,
      p.worker_cpu_bound, p.server_cpu_bound, p.worker_link_bound, p.server_link_bound,
      p.worker_bytes.sent, p.worker_bytes.received,
      (p.worker_bytes.received - p.ring_bytes) * p.workers / p.servers,
      (p.worker_bytes.sent - p.ring_bytes) * p.workers / p.servers, p.ring_bytes,
      p.unique_per_sample, in.speeds.worker_cpu_per_sample * 1e6,
      in.speeds.server_cpu_per_sample * 1e6, in.speeds.worker_cpu_per_server * 1e6,
      in.speeds.server_cpu_per_server * 1e6, in.speeds.worker_cpu_per_ring * 1e6,
      in.speeds.worker_wait_per_peer, in.speeds.worker_wait_per_doubling,
      in.speeds.busy_fraction);
}

}  // namespace

absl::StatusOr<double> ParseLinkRate(const std::string& text) {
  std::string t = absl::AsciiStrToLower(text);
  double scale = 1e9;  // GB/s
  for (const auto& [suffix, bytes] :
       {std::pair<const char*, double>{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"gb/s", 1e9},
        {"mb/s", 1e6}}) {
    if (absl::EndsWith(t, suffix)) {
      t.resize(t.size() - std::string(suffix).size());
      scale = bytes;
      break;
    }
  }
  double v = 0;
  if (!absl::SimpleAtod(t, &v) || !(v > 0)) {
    return UsageError(absl::StrCat("--bandwidth=", text,
                                   ": expected a rate such as 10gbit, 1gbit, 100mbit or 1.25 "
                                   "(GB/s)"));
  }
  return v * scale;
}

absl::Status RunHostsPlan(const HostsPlanRequest& r) {
  HostSpeeds speeds;
  if (!r.calibration.empty()) {
    PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(r.calibration));
    auto parsed =
        SpeedsFromScaleLines(text, r.calibration_rate, r.model.name, r.mode, r.consistency);
    if (!parsed.ok()) return UsageError(absl::StrCat("--calibration=", r.calibration, ": ",
                                                     parsed.status().message()));
    speeds = *parsed;
  }
  if (r.worker_us_per_sample > 0) speeds.worker_cpu_per_sample = r.worker_us_per_sample * 1e-6;
  if (r.server_us_per_sample > 0) speeds.server_cpu_per_sample = r.server_us_per_sample * 1e-6;
  if (r.worker_us_per_extra_server > 0) {
    speeds.worker_cpu_per_server = r.worker_us_per_extra_server * 1e-6;
  }
  if (speeds.source.empty()) speeds.source = "--worker_us_per_sample/--server_us_per_sample";
  std::vector<int> counts;
  for (int w = 1; w < r.hosts; w *= 2) counts.push_back(w);
  counts.push_back(r.hosts);
  std::vector<ScalePrediction> rows;
  ScaleInputs in;
  in.model = r.model;
  in.batch_size = r.batch_size;
  in.host_cpus = r.host_cpus;
  in.link_bytes_per_sec = r.link_bytes_per_sec;
  in.unique_per_sample = r.unique_per_sample;
  in.allreduce = r.mode == TrainMode::kAllreduce;
  in.ring = r.allreduce_ring;
  in.synchronous = r.mode == TrainMode::kPs && r.consistency != "asp";
  in.drift_allowance = r.drift_allowance;
  in.speeds = speeds;
  for (int w : counts) {
    in.workers = w;
    in.servers = r.servers > 0 && w == r.hosts ? r.servers : ServersFor(w, r.servers_per_worker);
    absl::StatusOr<ScalePrediction> p = PredictScale(in);
    if (!p.ok()) return UsageError(p.status().message());
    rows.push_back(*p);
  }
  if (r.json) {
    for (const ScalePrediction& p : rows) std::printf("%s\n", Json(p, in).c_str());
    return absl::OkStatus();
  }
  std::printf("%s mode%s, %s at batch %d: each host %.3g CPU, link %.3g Gbit/s each way\n",
              TrainModeName(r.mode), r.mode == TrainMode::kPs ? (" (" + r.consistency + ")").c_str() : "",
              r.model.name.c_str(), r.batch_size, r.host_cpus, r.link_bytes_per_sec * 8 / 1e9);
  if (in.synchronous) {
    std::printf("%s: each worker waits at the barrier, %.1f %% of its time per doubling of the "
                "workers%s\n",
                r.consistency.c_str(), speeds.worker_wait_per_doubling * 100,
                speeds.worker_wait_per_doubling > 0 ? ""
                                                    : " (no calibration runs of 2 or more workers)");
  }
  std::printf("speeds (%s): worker %.2f us CPU a sample, servers %.2f (+%.2f / +%.2f per extra "
              "server), busy %.2f of a host\n",
              speeds.source.c_str(), speeds.worker_cpu_per_sample * 1e6,
              speeds.server_cpu_per_sample * 1e6, speeds.worker_cpu_per_server * 1e6,
              speeds.server_cpu_per_server * 1e6, speeds.busy_fraction);
  if (in.allreduce) {
    std::printf("allreduce (%s): the dense gradients summed between the workers, +%.2f us of a "
                "worker's CPU a sample per step of the collective (W = 8: %d steps), %.1f %% of "
                "its time waiting per peer\n",
                in.ring ? "ring" : "bcube", speeds.worker_cpu_per_ring * 1e6,
                AllreduceSteps(8, in.ring), speeds.worker_wait_per_peer * 100);
  }
  std::printf("%-4s %-4s | %12s %10s | %-12s | %10s %10s %10s %10s | %9s %9s\n", "W", "S",
              "samples/s", "efficiency", "bottleneck", "wkr CPU", "srv CPU", "wkr link",
              "srv link", "B sent", "B recv");
  for (const ScalePrediction& p : rows) {
    std::printf("%-4d %-4d | %12.0f %10.3f | %-12s | %10.0f %10.0f %10.0f %10.0f | %9.1f %9.1f\n",
                p.workers, p.servers, p.samples_per_sec, p.efficiency, p.bottleneck.c_str(),
                p.worker_cpu_bound, p.server_cpu_bound, p.worker_link_bound, p.server_link_bound,
                p.worker_bytes.sent, p.worker_bytes.received);
  }
  std::printf(
      "\nW worker hosts, S server hosts; samples/s is the smallest of the four bounds (each "
      "role's CPU and link) less %.0f %% for the drift between runs (--drift_allowance); bytes "
      "are per sample, by a worker (a server moves the reverse, x W/S%s). The model and what it "
      "leaves out: launcher/plan_scale.h.\n",
      in.drift_allowance * 100,
      in.allreduce ? ", less the ring's bytes, which stay between the workers" : "");
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
