// InProcTransport: a Transport between threads of one process, for unit
// tests. Transports find each other through an InProcNetwork that the test
// owns (no global state). Messages are handed over by pointer (the Buffers
// are shared, never copied). Each transport still has its own I/O thread,
// so handlers see the same threading as with ZmqTransport.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
#include "common/transport.h"

namespace pstrain {

class InProcTransport;

// The registry of bound in-process endpoints. Thread-safe. Must outlive the
// transports that use it.
class InProcNetwork {
 public:
  // Drops every message for which `filter` returns true (fault injection).
  void SetDropFilter(std::function<bool(const std::string& to, const Incoming&)> filter);

 private:
  friend class InProcTransport;
  bool Register(const std::string& endpoint, InProcTransport* t);
  void Unregister(const std::string& endpoint);
  // Runs `fn(dest)` under the lock when `endpoint` is bound and the filter
  // lets the message through; returns false when it is not bound.
  bool Deliver(const std::string& endpoint, Incoming&& in);

  absl::Mutex mu_;
  std::map<std::string, InProcTransport*> endpoints_ ABSL_GUARDED_BY(mu_);
  std::function<bool(const std::string&, const Incoming&)> drop_filter_ ABSL_GUARDED_BY(mu_);
};

class InProcTransport final : public Transport {
 public:
  explicit InProcTransport(InProcNetwork* network);
  ~InProcTransport() override;

  absl::StatusOr<std::string> Bind(const std::string& endpoint) override;
  absl::Status Start(MessageHandler on_message, SendFailureHandler on_send_failure) override;
  void Stop() override;
  PeerId Connect(const std::string& endpoint) override;
  void Disconnect(PeerId peer) override;
  void SendRequest(PeerId peer, uint64_t request_id, Message message) override;
  void SendResponse(const std::string& route, uint64_t request_id, Message message) override;
  void Post(absl::AnyInvocable<void()> fn) override { loop_.Post(std::move(fn)); }
  void RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override {
    loop_.RunAfter(delay, std::move(fn));
  }
  bool InIoThread() const override { return loop_.InLoopThread(); }
  TransportStats stats() const override;

 private:
  friend class InProcNetwork;
  void Run();
  void Receive(Incoming&& in);  // any thread; queues onto this loop

  InProcNetwork* network_;
  EventLoop loop_;
  std::string endpoint_;
  absl::Mutex peers_mu_;
  std::vector<std::string> peers_ ABSL_GUARDED_BY(peers_mu_);  // index = PeerId; "" = closed
  std::thread thread_;
  std::atomic<bool> running_{false};
  MessageHandler on_message_;
  SendFailureHandler on_send_failure_;
  std::atomic<uint64_t> sent_{0}, received_{0}, failures_{0};
};

}  // namespace pstrain
