// ZmqTransport: the Transport over ZeroMQ (TCP, IPC or inproc endpoints).
//
// One ROUTER socket is bound to receive requests; one DEALER socket per
// connected peer sends requests and receives their responses. Replies go
// back through the ROUTER along the requester's routing id. One I/O thread
// owns every socket; other threads hand work to it through its EventLoop.
// Payloads are sent zero-copy: each frame's Buffer owner rides in ZeroMQ's
// free callback. Received frames are handed out zero-copy when aligned.
//
// System calls and wake-ups are the costs that matter on a small machine:
//  - several RPC messages to one destination travel in one ZeroMQ message
//    (a batch; see "Wire format" below), so they cost one wake-up of each
//    thread on the way instead of one each: requests made outside the I/O
//    thread are held back until the caller waits (or a few milliseconds,
//    see CallerDrivenIo), and the replies to one incoming batch leave as
//    one batch;
//  - the I/O thread does not use zmq_poll (which asks every socket for its
//    events twice per call): it waits in epoll on the sockets' ZMQ_FDs and
//    reads only the sockets that signalled or that it sent on since (a send
//    may consume a socket's signal);
//  - while it waits, other threads send as the loop themselves (an inline
//    run) instead of waking it to do it;
//  - a thread about to block on a reply receives it itself (a guest of the
//    loop): it takes that peer's socket out of the I/O thread's epoll set
//    and waits on it directly, so the reply costs no hand-off.
// Those two make the threads that call part-time owners of the sockets;
// LoopOwnership (common/loop_ownership.h) says who owns them at any moment,
// and every field and function of the loop is annotated with it. Turned off
// (ZmqTransportOptions::caller_driven_io), the I/O thread is their only
// owner.
//
// Peers are connected by address: a host name in an endpoint is resolved
// off the I/O thread, with a bounded time, and again when sends find no
// connection (see zmq_transport_connect.cc and common/resolver.h).
//
// Wire format: a ZeroMQ message is [route (ROUTER side only)] then one or
// more RPC messages, each [envelope][header][payload...]. An envelope whose
// reserved[0] has kBatchedFlag carries the count of its message's frames
// after the header in reserved[1..2] (little-endian); one without it is the
// last message and owns every frame that follows. An envelope with
// kPackedFlag has its payloads packed (common/frame_pack.h): its first
// frame after the header is a layout of (frame, offset, size) per payload
// over the frames after it, so that a message of many payloads costs a few
// frames.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
#include "common/loop_ownership.h"
#include "common/resolver.h"
#include "common/security/peer_budget.h"
#include "common/security/zap_handler.h"
#include "common/transport.h"

namespace pstrain {

struct ZmqTransportOptions {
  std::string name = "node";  // for logs
  TransportLimits limits;
  // With a public key set: every connection is CURVE-encrypted; the bound
  // socket admits only clients whose key is in `curve.allowed_clients`
  // (checked by a ZapHandler; others get no connection at all), and
  // connections go out with this node's key pair to peers holding
  // `curve.server_key`. See common/security/.
  CurveKeys curve;
  // Runs ZeroMQ's own I/O thread under SCHED_BATCH, so that it does not
  // preempt the thread that woke it. Off by default: batching is done by
  // the transport itself, and under SCHED_BATCH the I/O thread waits for a
  // time slice whenever another process keeps the core busy.
  bool batch_io_thread = false;
  // SO_SNDBUF / SO_RCVBUF of TCP connections (0: the kernel's autotuning).
  int socket_buffer_bytes = 0;
  // ZeroMQ names its I/O thread "<tag>/ZMQbg/IO/0" with tag >= 0 (plain
  // "ZMQbg/IO/0" otherwise): tells nodes sharing a process apart in top -H,
  // perf and /proc/self/task.
  int io_thread_tag = -1;
  // Runs the transport's thread and ZeroMQ's I/O thread on these CPUs only
  // (empty: wherever the scheduler likes). For nodes sharing a process;
  // a process of its own is pinned as a whole (--cpus, common/cpu_affinity.h).
  std::vector<int> cpus;
  // Lets the threads making calls send inline and receive their own replies
  // as guests of the loop (see above and CallerDrivenIo). Off: only the I/O
  // thread touches the sockets; requests made elsewhere still leave in
  // batches, at the cost of a hand-off to the I/O thread and back per call.
  bool caller_driven_io = true;
  // Resolves the host names of the endpoints given to Connect (null: the
  // process's Resolver::Default()). Tests inject one that hangs.
  std::shared_ptr<Resolver> resolver;
};

class ZmqTransport final : public Transport, public CallerDrivenIo {
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

  void FlushCalls() override;
  bool ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done, const GuestWake& wake,
                      absl::Time deadline) override;

 private:
  struct Peer;
  struct ResolveSink;
  // A socket's registration in the I/O thread's epoll set.
  struct Watch {
    int fd = -1;              // the socket's ZMQ_FD
    bool registered = false;  // in epoll_fd_
    bool marked = true;       // read it on the next pass
  };
  struct OutRequest {
    PeerId peer;
    uint64_t id;
    Message message;
  };
  struct OutResponse {
    std::string route;
    uint64_t id;
    Message message;
  };

  // The I/O thread's loop. What requires loop_.owner() below is for
  // whoever acts as the loop.
  void Run();
  // ZMQ_LINGER of every socket (at Stop: what is queued still leaves).
  void SetLinger(absl::Duration linger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  bool OnIoThread() const { return loop_.owner().OnIoThread(); }
  // Reads every socket marked for reading; true when one still has more.
  bool ReadMarked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  bool AnyMarked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Registers the sockets that are not yet in the epoll set.
  void SyncWatches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  void Unwatch(Watch& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Reads up to a batch of ZeroMQ messages; false when the socket is drained.
  bool DrainRouter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  bool DrainDealer(PeerId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Reads the rest of a multipart message after its first frame.
  // Returns false if the message was malformed (and fully drained).
  bool ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames);
  // Delivers the RPC messages in frames[first...]; returns how many there
  // were (0 when the whole ZeroMQ message was malformed and dropped).
  size_t Deliver(std::vector<zmq::message_t>& frames, size_t first, const std::string& route,
                 PeerId peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Sends everything queued for sending: requests held back by other
  // threads, then what this loop pass queued.
  void Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Sends requests [begin, end) of out, all to one peer, as few batches.
  void SendRequestBatch(std::vector<OutRequest>& out, size_t begin, size_t end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  void SendResponseBatch(std::vector<OutResponse>& out, size_t begin, size_t end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Sends msgs as one ZeroMQ message (route first when not null).
  bool SendBatchFrames(zmq::socket_t& socket, const std::string* route, EnvelopeKind kind,
                       const uint64_t* ids, Message* const* msgs, size_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // After a send on peer p: whoever waits on its socket must not miss a
  // wake-up signal the send consumed (possible only with replies in flight).
  void AfterSend(Peer& p, bool in_flight) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // `guest`: the guest reading the socket (not valid(): the I/O thread).
  void AfterForeignSend(zmq::socket_t& socket, Watch* watch, const GuestWake& guest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  absl::Status ApplyCommonOptions(zmq::socket_t& socket);
  // A request refused by budgets_: counted, logged at most once a second.
  void OnOverBudget(uint64_t bytes, int64_t held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  void DoConnect(PeerId id, const std::string& endpoint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  void DoDisconnect(PeerId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // Name resolution of peers (zmq_transport_connect.cc).
  void InitResolution();
  void EndResolution();
  // REQUIRES: peers_[id] exists, names a host and has a socket.
  void StartResolve(PeerId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // After a send to `id` found no connection: resolve its name again,
  // unless that happened less than kReResolveEvery ago.
  void ReResolveSoon(PeerId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  void OnResolved(PeerId id, absl::StatusOr<std::string> address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // A guest takes peer `id`'s socket out of the I/O thread's hands; returns
  // its fd, or -1 when there is no such socket or another guest reads it.
  int ClaimForGuest(PeerId id, const GuestWake& wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());
  // The guest gives it back: read to the end (`more` false) with nothing in
  // flight it stays unwatched until the next send, else the I/O thread
  // watches it again.
  void ReturnFromGuest(PeerId id, bool more) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner());

  ZmqTransportOptions options_;
  zmq::context_t context_;
  EventLoop loop_;  // its owner() guards the loop state below
  int epoll_fd_ = -1;

  // Requests made outside the loop, held until a flush.
  absl::Mutex held_mu_;
  std::vector<OutRequest> held_ ABSL_GUARDED_BY(held_mu_);
  std::atomic<bool> have_held_{false};
  // Set whenever a request is held: the I/O thread then wakes often enough
  // to bound how long one can wait for a flush.
  std::atomic<bool> held_recently_{false};

  // Loop state: whoever acts as the loop (the I/O thread, an inline runner
  // or a guest; see LoopOwnership).
  std::unique_ptr<zmq::socket_t> router_ ABSL_GUARDED_BY(loop_.owner());
  Watch router_watch_ ABSL_GUARDED_BY(loop_.owner());
  std::vector<std::unique_ptr<Peer>> peers_ ABSL_GUARDED_BY(loop_.owner());  // index = PeerId
  bool watches_dirty_ ABSL_GUARDED_BY(loop_.owner()) = true;
  std::vector<zmq::message_t> frames_ ABSL_GUARDED_BY(loop_.owner());  // receive scratch
  std::vector<OutRequest> pass_requests_ ABSL_GUARDED_BY(loop_.owner());  // queued by this pass
  std::vector<OutResponse> pass_responses_ ABSL_GUARDED_BY(loop_.owner());
  std::vector<OutRequest> sending_ ABSL_GUARDED_BY(loop_.owner());      // Flush scratch
  std::vector<OutResponse> responding_ ABSL_GUARDED_BY(loop_.owner());  // Flush scratch
  bool flushing_ ABSL_GUARDED_BY(loop_.owner()) = false;
  std::atomic<PeerId> next_peer_{0};
  std::thread thread_;
  std::atomic<bool> running_{false};
  MessageHandler on_message_;
  SendFailureHandler on_send_failure_;

  // Counters: written by the I/O thread, read anywhere.
  std::atomic<uint64_t> messages_sent_{0}, messages_received_{0}, bytes_sent_{0},
      bytes_received_{0}, dropped_malformed_{0}, send_failures_{0}, dropped_over_budget_{0};

  // Security: the per-peer bound on held requests (loop state) and, with
  // CURVE, the context's authentication handler (declared after context_:
  // it closes its socket first).
  PeerBudgets budgets_ ABSL_GUARDED_BY(loop_.owner());
  absl::Time last_budget_log_ ABSL_GUARDED_BY(loop_.owner()) = absl::InfinitePast();
  std::unique_ptr<ZapHandler> zap_;

  std::shared_ptr<Resolver> resolver_;
  std::shared_ptr<ResolveSink> resolve_sink_;  // where lookups answer
};

}  // namespace pstrain
