#include "server/coordinator/dashboard/observability.h"

#include <map>

#include <spdlog/spdlog.h>

#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "common/status.h"
#include "server/coordinator/dashboard/dashboard_routes.h"

namespace pstrain::server {

absl::StatusOr<std::unique_ptr<Observability>> Observability::Start(ObservabilityOptions options) {
  std::unique_ptr<Observability> o(new Observability());
  o->registry_ = std::make_unique<metrics::Registry>();
  o->monitor_ = std::make_unique<ClusterMonitor>(options.monitor, o->registry_.get());

  const int mport = options.metrics_port, dport = options.dashboard_port;
  auto start = [&o, &options](int port, std::map<std::string, http::HttpHandler> routes)
      -> absl::StatusOr<http::HttpServer*> {
    http::HttpServerOptions ho;
    ho.host = options.http_host;
    ho.port = port;
    PS_ASSIGN_OR_RETURN(auto server, http::StartHttpServer(ho, routes));
    o->http_.push_back(std::move(server));
    return o->http_.back().get();
  };
  std::map<std::string, http::HttpHandler> metrics_routes = {
      {"/metrics", metrics::MetricsHandler(o->registry_.get())}};
  if (dport != 0) {
    auto routes = DashboardRoutes(o->monitor_.get());
    if (dport == mport) routes.insert(metrics_routes.begin(), metrics_routes.end());
    PS_ASSIGN_OR_RETURN(http::HttpServer * s, start(dport, routes));
    o->dashboard_url_ = s->url() + "/";
    if (dport == mport) o->metrics_url_ = s->url() + "/metrics";
    spdlog::info("dashboard at {}", o->dashboard_url_);
  }
  if (mport != 0 && mport != dport) {
    PS_ASSIGN_OR_RETURN(http::HttpServer * s, start(mport, metrics_routes));
    o->metrics_url_ = s->url() + "/metrics";
  }
  if (!o->metrics_url_.empty()) spdlog::info("metrics at {}", o->metrics_url_);
  return o;
}

Observability::~Observability() { StopServing(); }

void Observability::StopServing() { http_.clear(); }

}  // namespace pstrain::server
