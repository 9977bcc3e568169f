// `pstrain plan --hosts=N` (ps or allreduce mode over N worker hosts): see
// launcher/plan_scale.h for the prediction.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/train_mode.h"
#include "model/models/model.h"

namespace pstrain::launcher {

struct HostsPlanRequest {
  worker::ModelOptions model;
  TrainMode mode = TrainMode::kPs;  // or kAllreduce (the worker flag --mode)
  bool allreduce_ring = false;      // --allreduce_algorithm=ring (else bcube)
  std::string consistency = "asp";  // ps mode: asp, bsp or ssp (--consistency when given)
  int batch_size = 1024;
  int hosts = 1;                    // worker hosts
  int servers = 0;                  // server hosts at W = hosts (0: by servers_per_worker)
  double servers_per_worker = 0.5;  // S = max(1, W x this) otherwise
  double host_cpus = 1;
  double link_bytes_per_sec = 1.25e9;
  double unique_per_sample = -1;
  std::string calibration;          // bench/scale.py JSON lines
  std::string calibration_rate;     // their "rate" to use ("": any)
  double worker_us_per_sample = 0;  // > 0: instead of the calibration's
  double server_us_per_sample = 0;
  double worker_us_per_extra_server = 0;
  double drift_allowance = 0.1;     // see launcher/plan_scale.h
  bool json = false;
};

// "10gbit", "100mbit", "1.25" (GB/s), "2GB/s" as bytes per second; a usage
// error naming --bandwidth otherwise.
absl::StatusOr<double> ParseLinkRate(const std::string& text);

absl::Status RunHostsPlan(const HostsPlanRequest& r);

}  // namespace pstrain::launcher
