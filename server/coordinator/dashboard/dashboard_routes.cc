#include "server/coordinator/dashboard/dashboard_routes.h"

#include <algorithm>
#include <cstdlib>

#include "server/coordinator/dashboard/web_assets.h"

namespace pstrain::server {
namespace {

http::HttpHandler StaticFile(const std::string& name, const std::string& content_type) {
  return [name, content_type](const http::HttpRequest&) {
    http::HttpResponse r;
    std::string_view body = web::Asset(name);
    if (body.empty()) {
      r.status = 404;
      r.body = "missing asset " + name + "\n";
      return r;
    }
    r.content_type = content_type;
    r.body = std::string(body);
    r.no_cache = false;
    return r;
  };
}

}  // namespace

std::map<std::string, http::HttpHandler> DashboardRoutes(const ClusterMonitor* monitor) {
  return DashboardRoutes([monitor](size_t points) { return monitor->StateJson(points); });
}

std::map<std::string, http::HttpHandler> DashboardRoutes(DashboardStateFn state) {
  std::map<std::string, http::HttpHandler> routes;
  routes["/"] = StaticFile("dashboard.html", "text/html; charset=utf-8");
  routes["/index.html"] = routes["/"];
  routes["/dashboard.js"] = StaticFile("dashboard.js", "text/javascript; charset=utf-8");
  routes["/charts.js"] = StaticFile("charts.js", "text/javascript; charset=utf-8");
  routes["/dashboard.css"] = StaticFile("dashboard.css", "text/css; charset=utf-8");
  routes["/uPlot.iife.min.js"] = StaticFile("uPlot.iife.min.js", "text/javascript; charset=utf-8");
  routes["/uPlot.min.css"] = StaticFile("uPlot.min.css", "text/css; charset=utf-8");
  routes["/api/state"] = [state = std::move(state)](const http::HttpRequest& req) {
    http::HttpResponse r;
    long points = std::strtol(req.Param("points", "600").c_str(), nullptr, 10);
    r.content_type = "application/json";
    r.body = state(static_cast<size_t>(std::clamp(points, 10L, 20000L)));
    return r;
  };
  return routes;
}

}  // namespace pstrain::server
