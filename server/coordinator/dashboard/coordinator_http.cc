// The coordinator's observability: the cluster monitor, /metrics and the
// dashboard, on one HTTP server or two.
#include <spdlog/spdlog.h>

#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/dashboard/dashboard_routes.h"

namespace pstrain::server {

absl::Status Coordinator::StartObservability() {
  registry_ = std::make_unique<metrics::Registry>();
  ClusterMonitorOptions mo;
  mo.num_servers = options_.num_servers;
  mo.num_workers = options_.num_workers;
  mo.consistency = options_.consistency == proto::Consistency::kBsp   ? "bsp"
                   : options_.consistency == proto::Consistency::kSsp ? "ssp"
                                                                      : "asp";
  mo.staleness = options_.staleness;
  mo.heartbeat_interval = options_.heartbeat_interval;
  mo.heartbeat_timeout = options_.heartbeat_timeout;
  mo.coordinator_endpoint = endpoint_;
  monitor_ = std::make_unique<ClusterMonitor>(mo, registry_.get());

  const int mport = options_.metrics_port, dport = options_.dashboard_port;
  auto start = [this](int port, std::map<std::string, http::HttpHandler> routes)
      -> absl::StatusOr<http::HttpServer*> {
    http::HttpServerOptions ho;
    ho.host = options_.http_host;
    ho.port = port;
    PS_ASSIGN_OR_RETURN(auto server, http::StartHttpServer(ho, routes));
    http_.push_back(std::move(server));
    return http_.back().get();
  };
  std::map<std::string, http::HttpHandler> metrics_routes = {
      {"/metrics", metrics::MetricsHandler(registry_.get())}};
  if (dport != 0) {
    auto routes = DashboardRoutes(monitor_.get());
    if (dport == mport) routes.insert(metrics_routes.begin(), metrics_routes.end());
    PS_ASSIGN_OR_RETURN(http::HttpServer * s, start(dport, routes));
    dashboard_url_ = s->url() + "/";
    if (dport == mport) metrics_url_ = s->url() + "/metrics";
    spdlog::info("dashboard at {}", dashboard_url_);
  }
  if (mport != 0 && mport != dport) {
    PS_ASSIGN_OR_RETURN(http::HttpServer * s, start(mport, metrics_routes));
    metrics_url_ = s->url() + "/metrics";
  }
  if (!metrics_url_.empty()) spdlog::info("metrics at {}", metrics_url_);
  return absl::OkStatus();
}

std::string Coordinator::dashboard_url() const { return dashboard_url_; }
std::string Coordinator::metrics_url() const { return metrics_url_; }

}  // namespace pstrain::server
