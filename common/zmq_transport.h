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
//  - while it waits, other threads send as the loop themselves
//    (EventLoop::TryRunInline) instead of waking it to do it;
//  - a thread about to block on a reply receives it itself (guest receive):
//    it takes that peer's socket out of the I/O thread's epoll set and
//    waits on it directly, so the reply costs no hand-off.
//
// Wire format: a ZeroMQ message is [route (ROUTER side only)] then one or
// more RPC messages, each [envelope][header][payload...]. An envelope whose
// reserved[0] has kBatchedFlag carries its message's payload count in
// reserved[1..2] (little-endian); one without it is the last message and
// owns every frame that follows.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
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
  // Runs the transport's thread and ZeroMQ's I/O thread on these CPUs only
  // (empty: wherever the scheduler likes). For nodes sharing a process;
  // a process of its own is pinned as a whole (--cpus, common/cpu_affinity.h).
  std::vector<int> cpus;
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
  bool ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done, int wake_fd,
                      absl::Time deadline) override;

 private:
  struct Peer;
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

  void Run();
  bool OnIoThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Reads every socket marked for reading; true when one still has more.
  bool ReadMarked();
  bool AnyMarked() const;
  // Registers the sockets that are not yet in the epoll set.
  void SyncWatches();
  void Unwatch(Watch& w);
  // Reads up to a batch of ZeroMQ messages; false when the socket is drained.
  bool DrainRouter();
  bool DrainDealer(PeerId id);
  // Reads the rest of a multipart message after its first frame.
  // Returns false if the message was malformed (and fully drained).
  bool ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames);
  // Delivers the RPC messages in frames[first...]; returns how many there
  // were (0 when the whole ZeroMQ message was malformed and dropped).
  size_t Deliver(std::vector<zmq::message_t>& frames, size_t first, const std::string& route,
                 PeerId peer);
  // Loop only. Sends everything queued for sending: requests held back by
  // other threads, then what this loop pass queued.
  void Flush();
  // Sends requests [begin, end) of out, all to one peer, as few batches.
  void SendRequestBatch(std::vector<OutRequest>& out, size_t begin, size_t end);
  void SendResponseBatch(std::vector<OutResponse>& out, size_t begin, size_t end);
  // Sends msgs as one ZeroMQ message (route first when not null).
  bool SendBatchFrames(zmq::socket_t& socket, const std::string* route, EnvelopeKind kind,
                       const uint64_t* ids, Message* const* msgs, size_t n);
  // After a send on peer p: whoever waits on its socket must not miss a
  // wake-up signal the send consumed (possible only with replies in flight).
  void AfterSend(Peer& p, bool in_flight);
  void AfterForeignSend(zmq::socket_t& socket, Watch* watch, int guest_wake_fd);
  absl::Status ApplyCommonOptions(zmq::socket_t& socket);
  // A request refused by budgets_: counted, logged at most once a second.
  void OnOverBudget(uint64_t bytes, int64_t held);
  void DoConnect(PeerId id, const std::string& endpoint);

  ZmqTransportOptions options_;
  zmq::context_t context_;
  EventLoop loop_;
  int epoll_fd_ = -1;

  // Requests made outside the loop, held until a flush.
  absl::Mutex held_mu_;
  std::vector<OutRequest> held_ ABSL_GUARDED_BY(held_mu_);
  std::atomic<bool> have_held_{false};
  // Set whenever a request is held: the I/O thread then wakes often enough
  // to bound how long one can wait for a flush.
  std::atomic<bool> held_recently_{false};

  // Loop state (the I/O thread's, or an inline runner's or guest's).
  std::unique_ptr<zmq::socket_t> router_;
  Watch router_watch_;
  std::vector<std::unique_ptr<Peer>> peers_;  // index = PeerId
  bool watches_dirty_ = true;
  std::vector<zmq::message_t> frames_;        // receive scratch
  std::vector<OutRequest> pass_requests_;     // queued by this pass
  std::vector<OutResponse> pass_responses_;
  std::vector<OutRequest> sending_;           // Flush scratch
  std::vector<OutResponse> responding_;       // Flush scratch
  bool flushing_ = false;
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
  PeerBudgets budgets_;
  absl::Time last_budget_log_ = absl::InfinitePast();
  std::unique_ptr<ZapHandler> zap_;
};

}  // namespace pstrain
