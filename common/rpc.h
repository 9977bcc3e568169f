// RpcNode: request/response on top of a Transport, with request ids,
// futures and deadlines.
//
// Call() sends a request and returns an RpcFuture that completes with the
// response, with Unavailable when the peer could not be reached before the
// deadline (sends to a peer that is not connected yet are retried with
// backoff until then), or with DeadlineExceeded. Every call has a deadline,
// so Wait() always returns. Incoming requests go to one handler on the I/O
// thread; it must not block and may reply later from any thread.
//
// Thread-safety: all public methods are thread-safe. Future callbacks run on
// the I/O thread (or a thread receiving replies as the loop). Call()
// registers the call and hands the request to the transport on the calling
// thread; a transport may hold it back until the calling thread waits
// (Wait, Ready or OnDone on any future of this node), so that requests made
// back to back leave together (see ZmqTransport): a request is never held
// for more than a few milliseconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/loop_ownership.h"
#include "common/transport.h"

namespace pstrain {

class RpcFuture {
 public:
  using Callback = absl::AnyInvocable<void(const absl::StatusOr<Message>&)>;

  RpcFuture() = default;
  bool valid() const { return state_ != nullptr; }
  // Blocks until the call completes; returns the response or the error.
  // When the transport allows it (CallerDrivenIo), the waiting thread
  // receives the reply itself rather than being woken for it.
  absl::StatusOr<Message> Wait() const;
  bool Ready() const;
  // Runs `fn` once the call completes: on the I/O thread, or right away on
  // the calling thread when it already has.
  void OnDone(Callback fn) const;

  // A future that is already complete (e.g. an error found before sending).
  static RpcFuture Completed(absl::StatusOr<Message> result);

 private:
  friend class RpcNode;
  struct State;
  explicit RpcFuture(std::shared_ptr<State> state) : state_(std::move(state)) {}
  static void Complete(State& state, absl::StatusOr<Message> result);

  std::shared_ptr<State> state_;
};

// An incoming request as the handler sees it.
struct RpcRequest {
  uint64_t id = 0;
  std::string route;  // reply route (opaque)
  Message message;
  // Set on a request that arrived inside another one (a bundle, e.g. a
  // worker's push and pull in one message): RpcNode::Reply hands its reply
  // here, to be folded into the bundle's one reply, instead of sending it.
  std::shared_ptr<std::function<void(Message)>> reply_sink;
};

struct RpcStats {
  uint64_t calls = 0;
  uint64_t deadline_exceeded = 0;
  uint64_t resends = 0;
  uint64_t stale_responses = 0;  // responses to calls that had already ended
};

class RpcNode {
 public:
  using RequestHandler = std::function<void(RpcRequest&&)>;

  explicit RpcNode(std::unique_ptr<Transport> transport);
  ~RpcNode();
  RpcNode(const RpcNode&) = delete;
  RpcNode& operator=(const RpcNode&) = delete;

  absl::StatusOr<std::string> Bind(const std::string& endpoint) {
    return transport_->Bind(endpoint);
  }
  absl::Status Start(RequestHandler handler);
  // Fails every pending call with Cancelled and stops the transport.
  void Stop();

  PeerId Connect(const std::string& endpoint);
  void Disconnect(PeerId peer) { transport_->Disconnect(peer); }
  const std::string& PeerEndpoint(PeerId peer) const;

  RpcFuture Call(PeerId peer, Message request, absl::Time deadline);
  // Fails every pending call to a peer other than `spared` with `why`, and
  // every later one until Unfence(): a node that must stop talking to a
  // group of peers at once (a worker when the cluster rolls back).
  void Fence(PeerId spared, absl::Status why);
  void Unfence();
  // Fails every call to `peer` pending now with `why` (later ones go out):
  // a node that found `peer` gone stops waiting for its answers.
  void FailPending(PeerId peer, absl::Status why);
  void Reply(const std::string& route, uint64_t id, Message response) {
    transport_->SendResponse(route, id, std::move(response));
  }
  void Reply(const RpcRequest& request, Message response) {
    if (request.reply_sink != nullptr) return (*request.reply_sink)(std::move(response));
    Reply(request.route, request.id, std::move(response));
  }

  Transport& transport() { return *transport_; }
  RpcStats stats() const;

 private:
  struct Pending {
    std::shared_ptr<RpcFuture::State> state;
    Message message;  // kept for resends
    PeerId peer = kNoPeer;
    absl::Time deadline;
    absl::Duration backoff;
  };
  struct DeadlineEntry {
    absl::Time when;
    uint64_t id;
    bool operator>(const DeadlineEntry& o) const { return when > o.when; }
  };

  void OnMessage(Incoming&& in);
  void OnSendFailure(PeerId peer, uint64_t id, absl::Status status);
  // REQUIRES: mu_ held. True when a sweep must be scheduled at `when`.
  bool NeedSweepBy(absl::Time when) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleSweep(absl::Time when);
  void Sweep();

  std::unique_ptr<Transport> transport_;
  CallerDrivenIo* driver_;  // the transport, when it has that capability
  RequestHandler handler_;
  std::atomic<uint64_t> next_id_{1};
  mutable absl::Mutex endpoints_mu_;
  std::vector<std::string> endpoints_ ABSL_GUARDED_BY(endpoints_mu_);

  // Calls in flight: registered by the calling thread, completed on the
  // I/O thread.
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<DeadlineEntry, std::vector<DeadlineEntry>, std::greater<DeadlineEntry>>
      deadlines_ ABSL_GUARDED_BY(mu_);
  absl::Time armed_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  PeerId fence_spared_ ABSL_GUARDED_BY(mu_) = kNoPeer;
  absl::Status fence_status_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> calls_{0}, deadline_exceeded_{0}, resends_{0}, stale_{0};
  std::atomic<bool> started_{false};
};

}  // namespace pstrain
