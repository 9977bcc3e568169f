// The dashboard's HTTP routes: the page and its assets, and /api/state
// (the monitor's JSON, polled by the page every second).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/http/http_server.h"
#include "server/coordinator/dashboard/cluster_monitor.h"

namespace pstrain::server {

// Routes for `monitor` (which must outlive the server that uses them).
std::map<std::string, http::HttpHandler> DashboardRoutes(const ClusterMonitor* monitor);

// The same page with /api/state from `state` (called with the most points a
// series may have; on the server's threads): `pstrain dashboard --job_dir`
// serves a job that has ended from its files so.
using DashboardStateFn = std::function<std::string(size_t max_points_per_series)>;
std::map<std::string, http::HttpHandler> DashboardRoutes(DashboardStateFn state);

}  // namespace pstrain::server
