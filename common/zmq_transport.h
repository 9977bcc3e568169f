// ZmqTransport: the Transport over ZeroMQ (TCP, IPC or inproc endpoints).
//
// One ROUTER socket is bound to receive requests; one DEALER socket per
// connected peer sends requests and receives their responses. Replies go
// back through the ROUTER along the requester's routing id. One I/O thread
// owns every socket; other threads hand work to it through its EventLoop.
// Payloads are sent zero-copy: each frame's Buffer owner rides in ZeroMQ's
// free callback. Received frames are handed out zero-copy when aligned.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
#include "common/transport.h"

namespace pstrain {

struct ZmqTransportOptions {
  std::string name = "node";  // for logs
  TransportLimits limits;
  CurveKeys curve;
};

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(ZmqTransportOptions options);
  ~ZmqTransport() override;

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
  struct Peer;

  void Run();
  void PollOnce();
  void DrainRouter();
  void DrainDealer(Peer& peer);
  // Reads the rest of a multipart message after its first frame.
  // Returns false if the message was malformed (and fully drained).
  bool ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames);
  void Deliver(std::vector<zmq::message_t>& frames, size_t first, std::string route, PeerId peer);
  bool SendFrames(zmq::socket_t& socket, const std::string* route, const Envelope& env,
                  Message& message);
  absl::Status ApplyCommonOptions(zmq::socket_t& socket);
  void DoConnect(PeerId id, const std::string& endpoint);

  ZmqTransportOptions options_;
  zmq::context_t context_;
  EventLoop loop_;
  std::unique_ptr<zmq::socket_t> router_;  // I/O thread after Start()
  std::vector<std::unique_ptr<Peer>> peers_;  // I/O thread; index = PeerId
  std::vector<zmq::pollitem_t> poll_items_;
  std::vector<Peer*> poll_peers_;  // peer of each poll item after the router
  bool poll_items_dirty_ = true;
  std::atomic<PeerId> next_peer_{0};
  std::thread thread_;
  std::atomic<bool> running_{false};
  MessageHandler on_message_;
  SendFailureHandler on_send_failure_;

  // Counters: written by the I/O thread, read anywhere.
  std::atomic<uint64_t> messages_sent_{0}, messages_received_{0}, bytes_sent_{0},
      bytes_received_{0}, dropped_malformed_{0}, send_failures_{0};
};

}  // namespace pstrain
