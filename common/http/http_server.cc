#include "common/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pstrain::http {

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  bool started = false;
};

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  int threads = std::max(1, options_.threads);
  impl_->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->server.set_keep_alive_timeout(1);
  // An answer goes out in more than one write (headers, body): without
  // TCP_NODELAY, Nagle holds the second until the client's delayed ACK
  // (40 ms on Linux).
  impl_->server.set_tcp_nodelay(true);
  if (options_.max_body_bytes > 0) impl_->server.set_payload_max_length(options_.max_body_bytes);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let
  // a second process share a port silently instead of failing to bind.
  impl_->server.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

HttpServer::~HttpServer() { Stop(); }

namespace {

// An exact-match pattern for `path`: the regex metacharacters escaped.
std::string ExactPattern(const std::string& path) {
  std::string pattern;
  for (char c : path) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) pattern += '\\';
    pattern += c;
  }
  return pattern;
}

httplib::Server::Handler Adapt(HttpHandler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    HttpRequest r;
    r.path = req.path;
    for (const auto& [k, v] : req.params) r.params[k] = v;
    r.body = req.body;
    r.content_type = req.get_header_value("Content-Type");
    HttpResponse out = handler(r);
    res.status = out.status;
    if (out.no_cache) res.set_header("Cache-Control", "no-store");
    res.set_content(out.body, out.content_type);
  };
}

}  // namespace

void HttpServer::Route(const std::string& path, HttpHandler handler) {
  impl_->server.Get(ExactPattern(path), Adapt(std::move(handler)));
}

void HttpServer::RoutePost(const std::string& path, HttpHandler handler) {
  impl_->server.Post(ExactPattern(path), Adapt(std::move(handler)));
}

absl::Status HttpServer::Start() {
  if (impl_->started) return absl::FailedPreconditionError("HTTP server already started");
  httplib::Server& s = impl_->server;
  if (options_.port == 0) {
    port_ = s.bind_to_any_port(options_.host.c_str());
    if (port_ <= 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":<any>"));
    }
  } else {
    if (!s.bind_to_port(options_.host.c_str(), options_.port)) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":",
                                                 options_.port, " (port in use?)"));
    }
    port_ = options_.port;
  }
  impl_->started = true;
  impl_->thread = std::thread([&s] { s.listen_after_bind(); });
  // stop() is a no-op until the loop runs: wait for it so Stop() works.
  // Its thread starts listening at once; a loaded machine may delay it.
  constexpr absl::Duration kListenTimeout = absl::Seconds(10);
  const absl::Time give_up = absl::Now() + kListenTimeout;
  while (!s.is_running() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  return absl::OkStatus();
}

std::string HttpServer::url() const {
  std::string host = options_.host == "0.0.0.0" || options_.host.empty() ? "127.0.0.1" : options_.host;
  return absl::StrCat("http://", host, ":", port_);
}

void HttpServer::Stop() {
  if (!impl_->started) return;
  impl_->started = false;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpServer(
    HttpServerOptions options, const std::map<std::string, HttpHandler>& handlers) {
  auto server = std::make_unique<HttpServer>(std::move(options));
  for (const auto& [path, handler] : handlers) server->Route(path, handler);
  if (absl::Status st = server->Start(); !st.ok()) return st;
  return server;
}

}  // namespace pstrain::http
