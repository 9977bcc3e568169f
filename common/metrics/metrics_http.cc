#include "common/metrics/metrics_http.h"

namespace pstrain::metrics {

http::HttpHandler MetricsHandler(Registry* registry) {
  return [registry](const http::HttpRequest&) {
    http::HttpResponse r;
    r.content_type = std::string(Registry::kContentType);
    r.body = registry->Render();
    return r;
  };
}

absl::StatusOr<std::unique_ptr<http::HttpServer>> StartMetricsServer(Registry* registry,
                                                                     const std::string& host,
                                                                     int port) {
  http::HttpServerOptions o;
  o.host = host;
  o.port = port;
  return http::StartHttpServer(o, {{"/metrics", MetricsHandler(registry)},
                                   {"/healthz", [](const http::HttpRequest&) {
                                      http::HttpResponse r;
                                      r.body = "ok\n";
                                      return r;
                                    }}});
}

}  // namespace pstrain::metrics
