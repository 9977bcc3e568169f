// ParameterServer's observability: its metrics registry, the optional
// /metrics endpoint, and the heartbeat body (sizes and totals the
// coordinator's dashboard shows).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "server/ps/parameter_server.h"

namespace pstrain::server {

absl::Status ParameterServer::StartMetrics() {
  registry_ = std::make_unique<metrics::Registry>();
  metrics_ = std::make_unique<ServerMetrics>(registry_.get());
  if (options_.metrics_port == 0) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(http_, metrics::StartMetricsServer(registry_.get(), options_.http_host,
                                                        options_.metrics_port));
  spdlog::info("metrics at {}/metrics", http_->url());
  return absl::OkStatus();
}

std::string ParameterServer::metrics_url() const {
  return http_ ? http_->url() + "/metrics" : std::string();
}

proto::Heartbeat ParameterServer::HeartbeatBody() {
  proto::Heartbeat hb;
  // The server's step: steps applied (BSP), or the newest worker clock.
  static const std::vector<int64_t> kNoClocks;
  static const std::vector<bool> kNoWorkers;
  hb.step = !policy_ ? 0 : store_ ? policy_->ServerStep() : policy_->applied();
  std::vector<TableStats> stats = CurrentStats();
  metrics_->Sample(store_ ? &stats : nullptr, policy_ ? policy_->clocks() : kNoClocks,
                   policy_ ? policy_->retired() : kNoWorkers, parked_.size(), &hb);
  return hb;
}

}  // namespace pstrain::server
