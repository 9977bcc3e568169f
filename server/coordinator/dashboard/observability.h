// Observability: the coordinator's monitor feed and its HTTP face. It owns
// the ClusterMonitor that the coordinator's core feeds (joins, heartbeats,
// deaths, the end of the job) and its checkpoint part records into, the
// metrics registry behind /metrics, and the HTTP servers of /metrics and
// the dashboard (one server when their ports are equal).
//
// Owned by the Coordinator. monitor() is thread-safe (see ClusterMonitor);
// Start, StopServing and the destructor belong to the owner's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"
#include "server/coordinator/dashboard/cluster_monitor.h"

namespace pstrain::http {
class HttpServer;
}

namespace pstrain::server {

struct ObservabilityOptions {
  ClusterMonitorOptions monitor;
  // Prometheus metrics at http://http_host:metrics_port/metrics and the
  // dashboard at http://http_host:dashboard_port/ (0: off; one server when
  // the ports are equal).
  int metrics_port = 0;
  int dashboard_port = 0;
  std::string http_host = "0.0.0.0";
};

class Observability {
 public:
  // Creates the monitor and serves what the options ask for.
  static absl::StatusOr<std::unique_ptr<Observability>> Start(ObservabilityOptions options);
  ~Observability();  // stops serving before the monitor goes
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  // Never null.
  ClusterMonitor* monitor() const { return monitor_.get(); }
  // The dashboard's and /metrics' URLs, or "" when not served.
  const std::string& dashboard_url() const { return dashboard_url_; }
  const std::string& metrics_url() const { return metrics_url_; }
  // Stops the HTTP servers; the monitor stays (the core may still feed it).
  void StopServing();

 private:
  Observability() = default;

  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<ClusterMonitor> monitor_;
  std::vector<std::unique_ptr<http::HttpServer>> http_;
  std::string dashboard_url_, metrics_url_;
};

}  // namespace pstrain::server
