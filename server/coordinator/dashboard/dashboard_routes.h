// The dashboard's HTTP routes: the page and its assets, and /api/state
// (the monitor's JSON, polled by the page every second).
#pragma once

#include <map>
#include <string>

#include "common/http/http_server.h"
#include "server/coordinator/dashboard/cluster_monitor.h"

namespace pstrain::server {

// Routes for `monitor` (which must outlive the server that uses them).
std::map<std::string, http::HttpHandler> DashboardRoutes(const ClusterMonitor* monitor);

}  // namespace pstrain::server
