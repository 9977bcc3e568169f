#include "common/zmq_transport.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/frame_pack.h"
#include "common/security/curve_socket.h"
#include "common/zmq_check.h"
#include "common/zmq_transport_internal.h"

// libzmq checks for a fork on every wait on a mailbox and every socket
// operation by comparing getpid() with the pid it started under; since
// glibc 2.25 getpid() is a system call each time. Measured (bench/results/
// 2026-12-07-issue42-after.md): 22 of a step's 128 system calls with one
// server and 75 of 332 with four, at about 1 us each in a VM. Every
// process that links this transport answers getpid() from a cache instead
// (libzmq's calls bind to this definition: the executable's symbols come
// first), as glibc did before 2.25. A child made by fork() forgets it (the
// pthread_atfork handler below); the supervisor's children exec at once,
// and no code here creates processes another way.
namespace {

std::atomic<pid_t> cached_pid{0};

[[maybe_unused]] const int kForgetPidInChild =
    pthread_atfork(nullptr, nullptr, [] { cached_pid.store(0, std::memory_order_relaxed); });

}  // namespace

extern "C" pid_t getpid() noexcept {
  pid_t pid = cached_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<pid_t>(syscall(SYS_getpid));
    cached_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

namespace pstrain {
using namespace zmq_internal;  // NOLINT: the transport's own internals


ZmqTransport::ZmqTransport(ZmqTransportOptions options)
    : options_(std::move(options)),
      context_(1),
      loop_(options_.caller_driven_io ? LoopOwnership::Mode::kShared
                                      : LoopOwnership::Mode::kSingleOwner),
      budgets_(options_.limits.max_peer_inflight_bytes) {
  InitResolution();
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    std::perror("pstrain: epoll_create1");
    std::abort();  // no file descriptors left: nothing sensible to do
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, loop_.wake_fd(), &ev);
  context_.set(zmq::ctxopt::blocky, 0);
  for (int cpu : options_.cpus) {
    // Before the context starts its I/O thread (on the first socket).
    if (zmq_ctx_set(context_.handle(), ZMQ_THREAD_AFFINITY_CPU_ADD, cpu) != 0) {
      spdlog::warn("{}: cannot pin ZeroMQ's I/O thread to CPU {}: {}", options_.name, cpu,
                   zmq_strerror(zmq_errno()));
    }
  }
  if (options_.io_thread_tag >= 0 &&
      zmq_ctx_set(context_.handle(), ZMQ_THREAD_NAME_PREFIX, options_.io_thread_tag) != 0) {
    spdlog::debug("{}: cannot name ZeroMQ's I/O thread: {}", options_.name, zmq_strerror(zmq_errno()));
  }
  if (options_.batch_io_thread) {
    try {
      context_.set(zmq::ctxopt::thread_sched_policy, SCHED_BATCH);
    } catch (const zmq::error_t& e) {
      spdlog::debug("{}: SCHED_BATCH for the ZeroMQ I/O thread: {}", options_.name, e.what());
    }
  }
}

ZmqTransport::~ZmqTransport() {
  EndResolution();
  Stop();
  router_.reset();
  peers_.clear();
  close(epoll_fd_);
}

absl::Status ZmqTransport::ApplyCommonOptions(zmq::socket_t& socket) {
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::linger, 0));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::maxmsgsize, options_.limits.max_frame_bytes));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::rcvhwm, options_.limits.receive_queue_messages));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::sndhwm, 0));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::tcp_keepalive, 1));
  if (options_.socket_buffer_bytes > 0) {
    PS_ZMQ_CHECK(socket.set(zmq::sockopt::sndbuf, options_.socket_buffer_bytes));
    PS_ZMQ_CHECK(socket.set(zmq::sockopt::rcvbuf, options_.socket_buffer_bytes));
  }
  return absl::OkStatus();
}

// Before Start: no thread acts as the loop yet, this one owns its state.
absl::StatusOr<std::string> ZmqTransport::Bind(const std::string& endpoint)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (running_) return absl::FailedPreconditionError("Bind after Start");
  const bool curve = CurveEnabled(options_.curve);
  if (curve) {
    PS_RETURN_IF_ERROR(ValidateCurveKeys(options_.curve));
    // Before the socket binds: handshakes ask it about every client.
    if (!zap_) {
      PS_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(context_, options_.curve.allowed_clients,
                                                  options_.name));
    }
  }
  auto router = std::make_unique<zmq::socket_t>();
  PS_ZMQ_CHECK(*router = zmq::socket_t(context_, zmq::socket_type::router));
  PS_RETURN_IF_ERROR(ApplyCommonOptions(*router));
  if (curve) {
    PS_RETURN_IF_ERROR(MakeCurveServer(*router, options_.curve));
  }
  PS_ZMQ_CHECK(router->set(zmq::sockopt::router_mandatory, 1));
  std::string actual;
  try {
    router->bind(NormalizeEndpoint(endpoint));
    actual = router->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return internal::ZmqError(e, absl::StrCat("bind ", endpoint).c_str(), __FILE__, __LINE__);
  }
  Unwatch(router_watch_);
  router_ = std::move(router);
  router_watch_ = Watch();
  watches_dirty_ = true;
  return actual;
}

absl::Status ZmqTransport::Start(MessageHandler on_message, SendFailureHandler on_send_failure) {
  if (running_.exchange(true)) return absl::FailedPreconditionError("transport already started");
  on_message_ = std::move(on_message);
  on_send_failure_ = std::move(on_send_failure);
  thread_ = std::thread([this] {
    // "<name>-net" (at most 15 bytes): the node's loop in top -H and perf.
    pthread_setname_np(pthread_self(), (options_.name.substr(0, 11) + "-net").c_str());
    if (!options_.cpus.empty()) {
      if (absl::Status st = PinCurrentThread(options_.cpus); !st.ok()) {
        spdlog::warn("{}: I/O thread not pinned: {}", options_.name, st.ToString());
      }
    }
    Run();
  });
  return absl::OkStatus();
}

void ZmqTransport::Stop() {
  if (!running_.exchange(false)) return;
  loop_.Wake();
  if (thread_.joinable()) thread_.join();
}

bool ZmqTransport::SendBatchFrames(zmq::socket_t& socket, const std::string* route,
                                   EnvelopeKind kind, const uint64_t* ids, Message* const* msgs,
                                   size_t n) {
  try {
    bool first = true;
    auto send = [&](zmq::message_t& frame, bool last) -> bool {
      zmq::send_flags flags = last ? zmq::send_flags::none : zmq::send_flags::sndmore;
      if (first) {
        first = false;
        // Once the first frame is accepted the rest of the message is too.
        return socket.send(frame, flags | zmq::send_flags::dontwait).has_value();
      }
      socket.send(frame, flags);
      return true;
    };
    if (route != nullptr) {
      zmq::message_t rf(route->data(), route->size());
      if (!send(rf, false)) return false;
    }
    uint64_t bytes = 0;
    for (size_t k = 0; k < n; ++k) {
      Message& m = *msgs[k];
      Envelope env;
      env.kind = kind;
      env.request_id = ids[k];
      // Many payloads go in a few frames (frame_pack.h): the layout, then the data.
      PackedPayloads packing;
      const bool packed = PackPayloads(m.payloads, &packing);
      const size_t np = packed ? 1 + packing.frames.size() : m.payloads.size();
      if (packed) env.reserved[0] |= kPackedFlag;
      if (n > 1) {
        env.reserved[0] |= kBatchedFlag;
        env.reserved[1] = static_cast<uint8_t>(np & 0xff);
        env.reserved[2] = static_cast<uint8_t>(np >> 8);
      }
      const bool last_message = k + 1 == n;
      zmq::message_t ef(&env, sizeof(env));
      if (!send(ef, false)) return false;
      zmq::message_t hf = ToFrame(m.header);
      send(hf, last_message && np == 0);
      bytes += sizeof(env) + m.header.size();
      for (size_t i = 0; i < np; ++i) {
        const Buffer& b = !packed ? m.payloads[i] : i == 0 ? packing.layout : packing.frames[i - 1];
        zmq::message_t pf = ToFrame(b);
        bytes += b.size();
        send(pf, last_message && i + 1 == np);
      }
    }
    messages_sent_.fetch_add(n, std::memory_order_relaxed);
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    return true;
  } catch (const zmq::error_t& e) {
    if (e.num() != EHOSTUNREACH && e.num() != EAGAIN) {
      spdlog::warn("{}: send failed: {}", options_.name, e.what());
    }
    return false;
  }
}

void ZmqTransport::AfterSend(Peer& p, bool in_flight) {
  if (!p.socket) return;
  if (p.read_by_calling_guest()) {
    if (in_flight) p.watch.marked = true;  // the guest reads before it waits
  } else if (p.io_thread_reads() && OnIoThread()) {
    p.watch.marked = true;  // read before the I/O thread waits again
  } else if (in_flight) {
    // Its reader is another thread: the guest, or the I/O thread (no guest).
    AfterForeignSend(*p.socket, &p.watch, p.guest);
  }
}

void ZmqTransport::AfterForeignSend(zmq::socket_t& socket, Watch* watch, const GuestWake& guest) {
  // The waiting thread waits on this socket's ZMQ_FD, which only signals
  // new activity: if the send processed the command that announced a
  // waiting message, nothing would wake that thread for it.
  int events = 0;
  try {
    events = socket.get(zmq::sockopt::events);
  } catch (const zmq::error_t&) {
    events = ZMQ_POLLIN;  // let the reader find out
  }
  if ((events & ZMQ_POLLIN) == 0) return;
  watch->marked = true;
  if (guest.valid()) {
    guest.Notify();
  } else {
    loop_.Wake();
  }
}

void ZmqTransport::SendRequestBatch(std::vector<OutRequest>& out, size_t begin, size_t end) {
  const PeerId peer = out[begin].peer;
  Peer* p = peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? peers_[peer].get() : nullptr;
  const bool in_flight = p != nullptr && p->in_flight();
  for (Batches<OutRequest> b(out, begin, end, static_cast<size_t>(options_.limits.max_frames));
       b.Next();) {
    // One ZeroMQ message.
    const size_t n = b.n;
    bool ok = p != nullptr && p->socket &&
              SendBatchFrames(*p->socket, nullptr, EnvelopeKind::kRequest, b.ids, b.msgs, n);
    if (ok) {
      p->requests_sent += n;
      if (p->detached && !p->read_by_calling_guest()) {
        // A reply is coming and its own guest may not be: watch again.
        p->detached = false;
        SyncWatches();
        p->watch.marked = false;  // nothing was in flight before this send
      }
    } else {
      const std::string why =
          p != nullptr ? p->NotConnectedWhy() : absl::StrCat("no connection to peer ", peer);
      // Before the handlers: they may disconnect it.
      ReResolveSoon(peer);
      for (size_t k = 0; k < n; ++k) {
        send_failures_.fetch_add(1, std::memory_order_relaxed);
        if (on_send_failure_) on_send_failure_(peer, b.ids[k], absl::UnavailableError(why));
      }
    }
  }
  // The failure handler may have disconnected it: look it up again.
  p = peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? peers_[peer].get() : nullptr;
  if (p != nullptr) AfterSend(*p, in_flight);
}

void ZmqTransport::SendResponseBatch(std::vector<OutResponse>& out, size_t begin, size_t end) {
  for (Batches<OutResponse> b(out, begin, end, static_cast<size_t>(options_.limits.max_frames));
       b.Next();) {
    if (!router_ || !SendBatchFrames(*router_, &out[begin].route, EnvelopeKind::kResponse, b.ids,
                                     b.msgs, b.n)) {
      send_failures_.fetch_add(b.n, std::memory_order_relaxed);
    }
  }
  if (!router_) return;
  if (OnIoThread()) {
    router_watch_.marked = true;
  } else {
    AfterForeignSend(*router_, &router_watch_, GuestWake());
  }
}

void ZmqTransport::Flush() {
  // Failure handlers and callbacks may queue more (or ask for a flush) while
  // this runs: they are picked up by the next round, not by a nested call.
  if (flushing_) return;
  flushing_ = true;
  for (int round = 0; round < 4; ++round) {
    sending_.clear();
    if (have_held_.load(std::memory_order_acquire)) {
      absl::MutexLock lock(&held_mu_);
      sending_.swap(held_);
      have_held_.store(false, std::memory_order_relaxed);
    }
    for (OutRequest& r : pass_requests_) sending_.push_back(std::move(r));
    pass_requests_.clear();
    responding_.clear();
    responding_.swap(pass_responses_);
    if (sending_.empty() && responding_.empty()) break;
    // One batch per destination, each one's messages in the order made.
    std::stable_sort(sending_.begin(), sending_.end(),
                     [](const OutRequest& a, const OutRequest& b) { return a.peer < b.peer; });
    for (size_t b = 0; b < sending_.size();) {
      size_t e = b + 1;
      while (e < sending_.size() && sending_[e].peer == sending_[b].peer) ++e;
      SendRequestBatch(sending_, b, e);
      b = e;
    }
    std::stable_sort(responding_.begin(), responding_.end(),
                     [](const OutResponse& a, const OutResponse& b) { return a.route < b.route; });
    for (size_t b = 0; b < responding_.size();) {
      size_t e = b + 1;
      while (e < responding_.size() && responding_[e].route == responding_[b].route) ++e;
      SendResponseBatch(responding_, b, e);
      b = e;
    }
  }
  sending_.clear();
  responding_.clear();
  flushing_ = false;
}

void ZmqTransport::SendRequest(PeerId peer, uint64_t request_id, Message message) {
  if (loop_.InLoopThread()) {
    loop_.owner().AssertHeld();
    pass_requests_.push_back(OutRequest{peer, request_id, std::move(message)});
    return;
  }
  // Held until the caller (or anyone) waits: requests made back to back
  // then leave as one batch.
  {
    absl::MutexLock lock(&held_mu_);
    held_.push_back(OutRequest{peer, request_id, std::move(message)});
    have_held_.store(true, std::memory_order_release);
  }
  held_recently_.store(true, std::memory_order_relaxed);
}

void ZmqTransport::FlushCalls() {
  if (!have_held_.load(std::memory_order_acquire)) return;
  if (loop_.InLoopThread()) {
    loop_.owner().AssertHeld();
    Flush();
    return;
  }
  if (loop_.owner().TryRunInline()) {
    Flush();
    loop_.owner().Leave();
    return;
  }
  // The I/O thread is busy (it flushes before it waits) or not running yet
  // (it flushes when it starts); make sure it looks.
  loop_.Wake();
}

void ZmqTransport::SendResponse(const std::string& route, uint64_t request_id, Message message) {
  if (loop_.InLoopThread()) {
    loop_.owner().AssertHeld();
    pass_responses_.push_back(OutResponse{route, request_id, std::move(message)});
    return;
  }
  if (loop_.owner().TryRunInline()) {
    pass_responses_.push_back(OutResponse{route, request_id, std::move(message)});
    Flush();
    loop_.owner().Leave();
    return;
  }
  loop_.Post([this, r = OutResponse{route, request_id, std::move(message)}]() mutable {
    loop_.owner().AssertHeld();
    pass_responses_.push_back(std::move(r));
  });
}

void ZmqTransport::OnOverBudget(uint64_t bytes, int64_t held) {
  dropped_over_budget_.fetch_add(1, std::memory_order_relaxed);
  absl::Time now = absl::Now();
  if (now - last_budget_log_ < absl::Seconds(1)) return;  // at most a line a second
  last_budget_log_ = now;
  spdlog::warn(
      "{}: dropped a {}-byte request: its sender holds {} bytes of requests not yet done "
      "(limit {}; {} dropped so far)",
      options_.name, bytes, held, options_.limits.max_peer_inflight_bytes,
      dropped_over_budget_.load(std::memory_order_relaxed));
}

TransportStats ZmqTransport::stats() const {
  TransportStats s;
  s.messages_sent = messages_sent_.load();
  s.messages_received = messages_received_.load();
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  s.dropped_malformed = dropped_malformed_.load();
  s.send_failures = send_failures_.load();
  s.dropped_over_budget = dropped_over_budget_.load();
  s.auth_refused = zap_ ? zap_->refused() : 0;
  return s;
}

}  // namespace pstrain
