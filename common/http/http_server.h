// HttpServer: a small HTTP/1.1 server for the observability endpoints
// (/metrics, the coordinator's dashboard), over cpp-httplib.
//
// Routes are exact paths for GET (Route) or POST (RoutePost) requests,
// registered before Start(). Each
// request runs its handler on one of the server's own threads (a small
// pool), never on a caller's thread: handlers must be thread-safe and must
// not block on the process's I/O thread for long. The destructor stops
// listening and joins every thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::http {

struct HttpRequest {
  std::string path;
  std::map<std::string, std::string> params;  // query parameters
  std::string body;                           // POST: the request's body
  std::string content_type;                   // its Content-Type header ("" none)

  // The parameter `name`, or `fallback` when absent.
  std::string Param(const std::string& name, const std::string& fallback = "") const {
    auto it = params.find(name);
    return it == params.end() ? fallback : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool no_cache = true;  // Cache-Control: no-store (live data)
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "0.0.0.0";  // address to listen on
  int port = 0;                  // 0: any free port (see port())
  int threads = 2;               // handler threads
  // Larger request bodies get 413 before any handler runs (0: httplib's
  // default).
  size_t max_body_bytes = 0;
};

class HttpServer {
 public:
  // An unstarted server; add routes, then Start().
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` with `handler`. REQUIRES: not started.
  void Route(const std::string& path, HttpHandler handler);
  // Serves POST `path` with `handler` (the body in HttpRequest::body).
  void RoutePost(const std::string& path, HttpHandler handler);

  // Binds and starts serving on a background thread. Unavailable when the
  // address cannot be bound (port in use), naming it.
  absl::Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // "http://host:port" with the listening host (127.0.0.1 for 0.0.0.0).
  std::string url() const;
  // Stops listening and joins the threads; idempotent.
  void Stop();

 private:
  struct Impl;
  HttpServerOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Starts an HttpServer serving `handlers` on host:port; convenience for the
// common case.
absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpServer(
    HttpServerOptions options, const std::map<std::string, HttpHandler>& handlers);

}  // namespace pstrain::http
