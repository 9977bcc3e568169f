// Serving a metrics Registry over HTTP at /metrics.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "common/metrics/registry.h"

namespace pstrain::metrics {

// A handler that renders `registry` (which must outlive it).
http::HttpHandler MetricsHandler(Registry* registry);

// An HttpServer on host:port serving `registry` at /metrics (and "ok" at
// /healthz). Unavailable when the port cannot be bound.
absl::StatusOr<std::unique_ptr<http::HttpServer>> StartMetricsServer(Registry* registry,
                                                                     const std::string& host,
                                                                     int port);

}  // namespace pstrain::metrics
