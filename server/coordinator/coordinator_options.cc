// The checks of a job's CoordinatorOptions, shared by pstrain_coordinator and
// `pstrain local`.
#include "absl/strings/ascii.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

absl::StatusOr<proto::Consistency> ParseConsistency(std::string name) {
  name = absl::AsciiStrToLower(name);
  if (name == "asp") return proto::Consistency::kAsp;
  if (name == "bsp") return proto::Consistency::kBsp;
  if (name == "ssp") return proto::Consistency::kSsp;
  return absl::InvalidArgumentError("--consistency=" + name + ": must be asp, bsp or ssp");
}

const char* ConsistencyName(proto::Consistency c) {
  return c == proto::Consistency::kBsp ? "bsp" : c == proto::Consistency::kSsp ? "ssp" : "asp";
}

absl::Status CheckCoordinatorOptions(const CoordinatorOptions& o) {
  if (o.staleness < 0) return absl::InvalidArgumentError("--staleness must be >= 0");
  for (int port : {o.metrics_port, o.dashboard_port}) {
    if (port < 0 || port > 65535) return absl::InvalidArgumentError("ports must be in 0..65535");
  }
  if (o.worker_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--worker_timeout must be >= 0");
  }
  if (o.resume_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--resume_timeout must be > 0");
  }
  const CheckpointOptions& c = o.checkpoint;
  if (c.every_steps < 0 || c.every_secs < 0 || c.keep < 1) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps/--checkpoint_every_secs must be >= 0 and --keep_checkpoints >= 1");
  }
  if (c.dir.empty() && (c.every_steps > 0 || c.every_secs > 0)) {
    return absl::InvalidArgumentError("checkpoints need --checkpoint_dir");
  }
  if (o.recover_workers && o.elastic_workers) {
    return absl::InvalidArgumentError(
        "--recover_workers and --elastic_workers: a dead worker either rolls the cluster back "
        "(exactly once) or is dropped (its rows after its last heartbeat trained twice); pick one");
  }
  if (o.recover_workers && c.dir.empty()) {
    return absl::InvalidArgumentError("--recover_workers rolls back to a checkpoint: it needs "
                                      "--checkpoint_dir");
  }
  if (o.heartbeat_timeout <= o.heartbeat_interval) {
    return absl::InvalidArgumentError("--heartbeat_timeout must exceed --heartbeat_interval");
  }
  return absl::OkStatus();
}

}  // namespace pstrain::server
