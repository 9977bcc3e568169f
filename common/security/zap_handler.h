// ZapHandler: the ZeroMQ authentication handler (ZAP, RFC 27) of one
// ZeroMQ context. Admits a CURVE connection only when the client's public
// key is on the list; refuses every other one (unlisted key, other
// mechanism) and logs the refusal with the peer's address, at most about
// once a second (the rest are counted and summed up in the next line).
//
// It binds inproc://zeromq.zap.01 in the context, so it must start before
// any socket of that context binds with a ZAP domain, and at most one may
// run per context. A thread of its own answers the requests: handshakes do
// not wait for the transport's I/O thread. Owned by the transport; counters
// are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

class ZapHandler {
 public:
  // `allowed` holds Z85 public keys; `name` prefixes the log lines.
  // REQUIRES: `context` outlives the handler.
  static absl::StatusOr<std::unique_ptr<ZapHandler>> Start(zmq::context_t& context,
                                                           const std::vector<std::string>& allowed,
                                                           std::string name);
  ~ZapHandler();  // stops the thread and closes the socket
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  uint64_t admitted() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  ZapHandler(zmq::socket_t socket, absl::flat_hash_set<std::string> allowed, std::string name,
             int stop_fd);
  void Run();
  // Reads one request and answers it.
  void AnswerOne();
  void LogRefusal(const std::string& address, const std::string& why);

  zmq::socket_t socket_;  // the handler thread's once started
  const absl::flat_hash_set<std::string> allowed_;
  const std::string name_;
  const int stop_fd_;  // eventfd: written to stop the thread
  std::thread thread_;
  std::atomic<uint64_t> admitted_{0}, refused_{0};
  // Handler thread only.
  absl::Time last_log_ = absl::InfinitePast();
  uint64_t unlogged_ = 0;
};

}  // namespace pstrain
