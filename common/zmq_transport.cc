#include "common/zmq_transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/security/curve_socket.h"
#include "common/zmq_check.h"

namespace pstrain {
namespace {

// Frames up to this size are copied: cheaper than an owner allocation and
// ZeroMQ stores them inline anyway.
constexpr size_t kCopyBelowBytes = 512;
// ZeroMQ messages read from one socket before servicing the others again.
constexpr int kReadBatch = 256;
// Longest wait of the I/O thread when no timer is due (it re-checks `running_`).
constexpr absl::Duration kMaxWait = absl::Milliseconds(200);
// Its longest wait while other threads hold requests back: the bound on how
// long a request nobody waits for stays unsent.
constexpr absl::Duration kHeldWait = absl::Milliseconds(5);
// RPC messages in one ZeroMQ message.
constexpr size_t kMaxBatch = 64;
// envelope.reserved[0]: the payload count is in reserved[1..2].
constexpr uint8_t kBatchedFlag = 1;
// epoll tags: the wake fd, the router, then 2 + PeerId.
constexpr uint64_t kWakeTag = 0;
constexpr uint64_t kRouterTag = 1;
constexpr uint64_t kFirstPeerTag = 2;
constexpr int kMaxEvents = 64;

int TimeoutMs(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(d + absl::Microseconds(999)));
}

void DrainEventFd(int fd) {
  uint64_t value;
  ssize_t n;
  do {
    n = read(fd, &value, sizeof(value));
  } while (n < 0 && errno == EINTR);
}

void WriteEventFd(int fd) {
  uint64_t one = 1;
  ssize_t n;
  do {
    n = write(fd, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void FreeOwner(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}

zmq::message_t ToFrame(const Buffer& b) {
  if (b.size() <= kCopyBelowBytes || b.owner() == nullptr) {
    if (b.owner() == nullptr && b.size() > kCopyBelowBytes) {
      // Static storage: no owner to keep, no copy needed.
      return zmq::message_t(const_cast<uint8_t*>(b.data()), b.size(), nullptr, nullptr);
    }
    return zmq::message_t(b.data(), b.size());
  }
  auto* hint = new std::shared_ptr<const void>(b.owner());
  return zmq::message_t(const_cast<uint8_t*>(b.data()), b.size(), &FreeOwner, hint);
}

Buffer FromFrame(zmq::message_t&& frame) {
  auto addr = reinterpret_cast<uintptr_t>(frame.data());
  if (frame.size() <= kCopyBelowBytes || addr % 8 != 0) {
    return Buffer::Copy(frame.data(), frame.size());
  }
  auto holder = std::make_shared<zmq::message_t>(std::move(frame));
  return Buffer(holder->data(), holder->size(), holder);
}

// ZeroMQ wants "*" for an ephemeral port.
std::string NormalizeEndpoint(const std::string& endpoint) {
  if (absl::StartsWith(endpoint, "tcp://") && absl::EndsWith(endpoint, ":0")) {
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  }
  return endpoint;
}

int SocketFd(zmq::socket_t& socket) {
  try {
    return static_cast<int>(socket.get(zmq::sockopt::fd));
  } catch (const zmq::error_t&) {
    return -1;
  }
}

}  // namespace

struct ZmqTransport::Peer {
  std::string endpoint;
  std::unique_ptr<zmq::socket_t> socket;  // null once disconnected
  Watch watch;
  // A guest thread reads this socket (it is out of the epoll set).
  bool guest = false;
  std::thread::id guest_thread;
  int guest_wake_fd = -1;
  // Requests sent and messages read on this socket: when equal, no reply
  // can be on its way, so a send cannot have consumed a wake-up signal.
  uint64_t requests_sent = 0;
  uint64_t messages_read = 0;
  // Out of the epoll set although no guest reads it: a guest left it empty
  // with nothing in flight, so nothing can arrive until a request is sent.
  // The next send by anyone but the socket's own guest puts it back (so the
  // thread that sends and then waits for the reply skips two epoll_ctl).
  bool detached = false;

  bool in_flight() const { return requests_sent != messages_read; }
};

ZmqTransport::ZmqTransport(ZmqTransportOptions options)
    : options_(std::move(options)), context_(1), budgets_(options_.limits.max_peer_inflight_bytes) {
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
  if (options_.batch_io_thread) {
    try {
      context_.set(zmq::ctxopt::thread_sched_policy, SCHED_BATCH);
    } catch (const zmq::error_t& e) {
      spdlog::debug("{}: SCHED_BATCH for the ZeroMQ I/O thread: {}", options_.name, e.what());
    }
  }
}

ZmqTransport::~ZmqTransport() {
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

absl::StatusOr<std::string> ZmqTransport::Bind(const std::string& endpoint) {
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
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ZmqTransport::Stop() {
  if (!running_.exchange(false)) return;
  loop_.Wake();
  if (thread_.joinable()) thread_.join();
}

PeerId ZmqTransport::Connect(const std::string& endpoint) {
  PeerId id = next_peer_.fetch_add(1);
  if (InIoThread()) {
    DoConnect(id, endpoint);
  } else {
    loop_.Post([this, id, endpoint] { DoConnect(id, endpoint); });
  }
  return id;
}

void ZmqTransport::DoConnect(PeerId id, const std::string& endpoint) {
  if (static_cast<size_t>(id) >= peers_.size()) peers_.resize(id + 1);
  auto peer = std::make_unique<Peer>();
  peer->endpoint = endpoint;
  try {
    auto socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    if (absl::Status st = ApplyCommonOptions(*socket); !st.ok()) {
      spdlog::error("{}: cannot configure socket for {}: {}", options_.name, endpoint, st.ToString());
    }
    if (CurveEnabled(options_.curve)) {
      // Without its keys it must not connect at all (sends then fail fast).
      if (absl::Status st = MakeCurveClient(*socket, options_.curve); !st.ok()) {
        spdlog::error("{}: cannot connect to {}: {}", options_.name, endpoint, st.ToString());
        socket.reset();
      }
    }
    // Queue only on completed connections: a request to a peer that is not
    // (or no longer) connected fails fast and is retried by the caller,
    // instead of reaching a restarted peer long after it was sent.
    if (socket) {
      socket->set(zmq::sockopt::immediate, 1);
      socket->set(zmq::sockopt::reconnect_ivl, 20);
      socket->set(zmq::sockopt::reconnect_ivl_max, 1000);
      socket->connect(endpoint);
      peer->socket = std::move(socket);
    }
  } catch (const zmq::error_t& e) {
    spdlog::error("{}: cannot connect to {}: {}", options_.name, endpoint, e.what());
  }
  peers_[id] = std::move(peer);
  watches_dirty_ = true;  // registered before the I/O thread waits again
}

void ZmqTransport::Disconnect(PeerId peer) {
  auto fn = [this, peer] {
    if (peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer]) {
      Peer& p = *peers_[peer];
      Unwatch(p.watch);
      if (p.guest && p.guest_thread != std::this_thread::get_id()) WriteEventFd(p.guest_wake_fd);
      p.socket.reset();
    }
  };
  // Closing a socket changes what the I/O thread polls: always its job.
  if (OnIoThread()) {
    fn();
  } else {
    loop_.Post(std::move(fn));
  }
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
      const size_t np = m.payloads.size();
      if (n > 1) {
        env.reserved[0] = kBatchedFlag;
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
        zmq::message_t pf = ToFrame(m.payloads[i]);
        bytes += m.payloads[i].size();
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
  if (p.guest) {
    if (p.guest_thread == std::this_thread::get_id()) {
      if (in_flight) p.watch.marked = true;  // the guest reads before it waits
    } else if (in_flight) {
      AfterForeignSend(*p.socket, &p.watch, p.guest_wake_fd);
    }
  } else if (OnIoThread()) {
    p.watch.marked = true;  // read before the I/O thread waits again
  } else if (in_flight) {
    AfterForeignSend(*p.socket, &p.watch, -1);
  }
}

void ZmqTransport::AfterForeignSend(zmq::socket_t& socket, Watch* watch, int guest_wake_fd) {
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
  if (guest_wake_fd >= 0) {
    WriteEventFd(guest_wake_fd);
  } else {
    loop_.Wake();
  }
}

void ZmqTransport::SendRequestBatch(std::vector<OutRequest>& out, size_t begin, size_t end) {
  const PeerId peer = out[begin].peer;
  Peer* p = peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? peers_[peer].get() : nullptr;
  const bool in_flight = p != nullptr && p->in_flight();
  uint64_t ids[kMaxBatch];
  Message* msgs[kMaxBatch];
  const size_t max_frames = static_cast<size_t>(options_.limits.max_frames);
  size_t i = begin;
  while (i < end) {
    // One ZeroMQ message: at most kMaxBatch messages and what a receiver
    // accepts as one message's frames (a single bigger message goes alone).
    size_t n = 0, frames = 0;
    while (i + n < end && n < kMaxBatch) {
      size_t f = 2 + out[i + n].message.payloads.size();
      if (n > 0 && frames + f > max_frames) break;
      frames += f;
      ids[n] = out[i + n].id;
      msgs[n] = &out[i + n].message;
      ++n;
    }
    bool ok = p != nullptr && p->socket &&
              SendBatchFrames(*p->socket, nullptr, EnvelopeKind::kRequest, ids, msgs, n);
    if (ok) {
      p->requests_sent += n;
      if (p->detached && !(p->guest && p->guest_thread == std::this_thread::get_id())) {
        // A reply is coming and its own guest may not be: watch again.
        p->detached = false;
        SyncWatches();
        p->watch.marked = false;  // nothing was in flight before this send
      }
    } else {
      for (size_t k = 0; k < n; ++k) {
        send_failures_.fetch_add(1, std::memory_order_relaxed);
        if (on_send_failure_) {
          on_send_failure_(peer, ids[k],
                           absl::UnavailableError(absl::StrCat(
                               "no connection to ",
                               p != nullptr ? p->endpoint : absl::StrCat("peer ", peer))));
        }
      }
    }
    i += n;
  }
  // The failure handler may have disconnected it: look it up again.
  p = peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? peers_[peer].get() : nullptr;
  if (p != nullptr) AfterSend(*p, in_flight);
}

void ZmqTransport::SendResponseBatch(std::vector<OutResponse>& out, size_t begin, size_t end) {
  uint64_t ids[kMaxBatch];
  Message* msgs[kMaxBatch];
  const size_t max_frames = static_cast<size_t>(options_.limits.max_frames);
  size_t i = begin;
  while (i < end) {
    size_t n = 0, frames = 0;
    while (i + n < end && n < kMaxBatch) {
      size_t f = 2 + out[i + n].message.payloads.size();
      if (n > 0 && frames + f > max_frames) break;
      frames += f;
      ids[n] = out[i + n].id;
      msgs[n] = &out[i + n].message;
      ++n;
    }
    if (!router_ || !SendBatchFrames(*router_, &out[begin].route, EnvelopeKind::kResponse, ids,
                                     msgs, n)) {
      send_failures_.fetch_add(n, std::memory_order_relaxed);
    }
    i += n;
  }
  if (!router_) return;
  if (OnIoThread()) {
    router_watch_.marked = true;
  } else {
    AfterForeignSend(*router_, &router_watch_, -1);
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
    Flush();
    return;
  }
  if (loop_.TryRunInline([this] { Flush(); })) return;
  // The I/O thread is busy (it flushes before it waits) or not running yet
  // (it flushes when it starts); make sure it looks.
  loop_.Wake();
}

void ZmqTransport::SendResponse(const std::string& route, uint64_t request_id, Message message) {
  if (loop_.InLoopThread()) {
    pass_responses_.push_back(OutResponse{route, request_id, std::move(message)});
    return;
  }
  if (loop_.TryRunInline([&] {
        pass_responses_.push_back(OutResponse{route, request_id, std::move(message)});
        Flush();
      })) {
    return;
  }
  loop_.Post([this, r = OutResponse{route, request_id, std::move(message)}]() mutable {
    pass_responses_.push_back(std::move(r));
  });
}

bool ZmqTransport::ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames) {
  bool ok = true;
  const size_t max_frames = static_cast<size_t>(options_.limits.max_frames) + 3;
  const uint64_t max_bytes = static_cast<uint64_t>(options_.limits.max_message_bytes);
  uint64_t bytes = frames.back().size();
  while (frames.back().more()) {
    zmq::message_t next;
    try {
      // The rest of a multipart message is already here: this cannot block.
      (void)socket.recv(next, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      return false;
    }
    bytes += next.size();
    if (frames.size() >= max_frames || bytes > max_bytes) {
      ok = false;  // keep draining, drop the whole message
      frames.back() = std::move(next);
      continue;
    }
    frames.push_back(std::move(next));
  }
  return ok;
}

size_t ZmqTransport::Deliver(std::vector<zmq::message_t>& frames, size_t first,
                             const std::string& route, PeerId peer) {
  // Check the whole batch before delivering any of it.
  struct Part {
    size_t env;
    size_t payloads;
  };
  Part parts[kMaxBatch];
  size_t n = 0;
  const EnvelopeKind expected = peer == kNoPeer ? EnvelopeKind::kRequest : EnvelopeKind::kResponse;
  for (size_t i = first; i < frames.size();) {
    Envelope env;
    if (n == kMaxBatch || frames.size() - i < 2 || frames[i].size() != sizeof(Envelope)) {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    std::memcpy(&env, frames[i].data(), sizeof(Envelope));
    size_t np = frames.size() - i - 2;  // a last message owns the rest
    if (env.reserved[0] & kBatchedFlag) {
      np = static_cast<size_t>(env.reserved[1]) | static_cast<size_t>(env.reserved[2]) << 8;
    }
    if (env.magic != Envelope::kMagic || env.kind != expected || np > frames.size() - i - 2) {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    parts[n++] = Part{i, np};
    i += 2 + np;
  }
  if (n == 0) {
    dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  for (size_t k = 0; k < n; ++k) {
    const size_t e = parts[k].env;
    Incoming in;
    std::memcpy(&in.envelope, frames[e].data(), sizeof(Envelope));
    uint64_t bytes = frames[e].size() + frames[e + 1].size();
    in.message.header = FromFrame(std::move(frames[e + 1]));
    in.message.payloads.reserve(parts[k].payloads);
    for (size_t i = e + 2; i < e + 2 + parts[k].payloads; ++i) {
      bytes += frames[i].size();
      in.message.payloads.push_back(FromFrame(std::move(frames[i])));
    }
    messages_received_.fetch_add(1, std::memory_order_relaxed);
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
    int64_t held = 0;
    if (peer == kNoPeer &&
        !budgets_.Charge(route, static_cast<int64_t>(bytes), in.message, &held)) {
      OnOverBudget(bytes, held);
      continue;
    }
    in.reply_route = route;
    in.peer = peer;
    if (on_message_) on_message_(std::move(in));
  }
  return n;
}

bool ZmqTransport::DrainRouter() {
  for (int i = 0; i < kReadBatch; ++i) {
    if (!router_) return false;
    zmq::message_t first;
    try {
      if (!router_->recv(first, zmq::recv_flags::dontwait)) return false;
    } catch (const zmq::error_t& e) {
      spdlog::warn("{}: receive failed: {}", options_.name, e.what());
      return false;
    }
    frames_.clear();
    frames_.push_back(std::move(first));
    if (!ReadFrames(*router_, frames_)) {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::string route(static_cast<const char*>(frames_[0].data()), frames_[0].size());
    Deliver(frames_, 1, route, kNoPeer);
    // The replies to one batch leave as one batch (before the next read, so
    // that read also covers any signal the send consumed).
    Flush();
  }
  return true;
}

bool ZmqTransport::DrainDealer(PeerId id) {
  for (int i = 0; i < kReadBatch; ++i) {
    // The handler may disconnect this peer: re-check every message.
    if (!peers_[id] || !peers_[id]->socket) return false;
    zmq::socket_t& socket = *peers_[id]->socket;
    zmq::message_t first;
    try {
      if (!socket.recv(first, zmq::recv_flags::dontwait)) return false;
    } catch (const zmq::error_t&) {
      return false;
    }
    frames_.clear();
    frames_.push_back(std::move(first));
    size_t delivered = 0;
    if (ReadFrames(socket, frames_)) {
      delivered = Deliver(frames_, 0, std::string(), id);
    } else {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
    }
    if (peers_[id]) peers_[id]->messages_read += delivered;
    Flush();
  }
  return true;
}

bool ZmqTransport::AnyMarked() const {
  if (router_ && router_watch_.marked) return true;
  for (const auto& p : peers_) {
    if (p && p->socket && !p->guest && p->watch.marked) return true;
  }
  return false;
}

bool ZmqTransport::ReadMarked() {
  // Handlers may send, which marks sockets again: a few passes. A socket
  // read until empty needs no second look for sends made before that.
  for (int pass = 0; pass < 4 && AnyMarked(); ++pass) {
    if (router_ && router_watch_.marked) {
      router_watch_.marked = DrainRouter();
      if (router_watch_.marked) return true;  // a full batch: more is waiting
    }
    for (size_t id = 0; id < peers_.size(); ++id) {
      Peer* p = peers_[id].get();
      if (p == nullptr || !p->socket || p->guest || !p->watch.marked) continue;
      p->watch.marked = DrainDealer(static_cast<PeerId>(id));
      if (p->watch.marked) return true;
    }
  }
  return AnyMarked();
}

void ZmqTransport::Unwatch(Watch& w) {
  if (w.registered) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
    w.registered = false;
  }
}

void ZmqTransport::SyncWatches() {
  auto watch = [this](zmq::socket_t& socket, Watch& w, uint64_t tag) {
    if (w.registered) return;
    if (w.fd < 0) w.fd = SocketFd(socket);
    if (w.fd < 0) return;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = tag;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, w.fd, &ev) == 0) {
      w.registered = true;
      w.marked = true;  // anything that came before the registration
    } else {
      spdlog::error("{}: epoll_ctl: {}", options_.name, std::strerror(errno));
    }
  };
  if (router_) watch(*router_, router_watch_, kRouterTag);
  for (size_t id = 0; id < peers_.size(); ++id) {
    Peer* p = peers_[id].get();
    if (p != nullptr && p->socket && !p->guest && !p->detached) {
      watch(*p->socket, p->watch, kFirstPeerTag + id);
    }
  }
  watches_dirty_ = false;
}

bool ZmqTransport::ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done, int wake_fd,
                                  absl::Time deadline) {
  if (OnIoThread() || loop_.InLoopThread()) return false;
  if (!loop_.TryEnterGuest()) return false;
  Peer* p = peer >= 0 && static_cast<size_t>(peer) < peers_.size() ? peers_[peer].get() : nullptr;
  if (p == nullptr || !p->socket || p->guest) {
    Flush();  // held requests leave anyway
    loop_.LeaveGuest();
    return false;
  }
  if (p->watch.fd < 0) p->watch.fd = SocketFd(*p->socket);
  const int fd = p->watch.fd;
  p->guest = true;
  p->guest_thread = std::this_thread::get_id();
  p->guest_wake_fd = wake_fd;
  // Out of the I/O thread's set: only this thread wakes for the reply.
  Unwatch(p->watch);
  // What this thread (and others) held back leaves now, as one batch per peer.
  Flush();
  bool alive = true, more = false;
  // Read first only when something may be waiting unannounced; otherwise
  // the next reply signals the socket's fd.
  p = peers_[peer].get();
  bool read = p == nullptr || p->watch.marked;
  while (true) {
    if (read) more = DrainDealer(peer);
    read = true;
    if (done()) break;
    p = peers_[peer].get();
    if (p == nullptr || !p->socket) break;  // a handler disconnected it
    if (more) continue;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    Flush();
    loop_.PauseGuest();
    pollfd pfds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int rc = poll(pfds, 2, TimeoutMs(std::min(left, kMaxWait)));
    if (rc > 0 && (pfds[1].revents & POLLIN)) DrainEventFd(wake_fd);
    alive = loop_.ResumeGuest();
    if (!alive || done()) break;
  }
  if (alive) {
    p = peers_[peer].get();
    if (p != nullptr) {
      p->guest = false;
      p->guest_wake_fd = -1;
      p->guest_thread = std::thread::id();
      if (p->socket) {
        if (!more && !p->in_flight()) {
          // Read to the end with nothing in flight: nothing can arrive
          // before the next request, which re-attaches it if need be.
          p->detached = true;
        } else {
          // Back to the I/O thread. Read to the end just now, the socket
          // has nothing unannounced: a signal pending now is reported at once.
          p->detached = false;
          SyncWatches();
          p->watch.marked = more;
          if (more) loop_.Wake();
        }
      }
    }
    Flush();
  }
  loop_.LeaveGuest();
  return true;
}

void ZmqTransport::Run() {
  loop_.BindToCurrentThread();
  loop_.BeginWork();
  epoll_event events[kMaxEvents];
  bool woken = false;
  while (running_.load(std::memory_order_relaxed)) {
    loop_.RunPending(woken);
    loop_.RunDueTimers();
    if (watches_dirty_) SyncWatches();
    Flush();
    bool more = ReadMarked();
    Flush();
    if (watches_dirty_) SyncWatches();
    // Sends just now may have consumed a socket's signal: read it first.
    more |= AnyMarked();
    absl::Duration cap = held_recently_.exchange(false, std::memory_order_relaxed) ? kHeldWait
                                                                                  : kMaxWait;
    absl::Duration wait = more || loop_.HasPending() ? absl::ZeroDuration()
                                                     : loop_.TimeToNextTimer(cap);
    int timeout_ms = TimeoutMs(wait);
    loop_.EndWork(absl::Now() + absl::Milliseconds(timeout_ms));
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    int err = errno;
    loop_.BeginWork();
    if (n < 0 && err != EINTR) {
      spdlog::error("{}: epoll_wait: {}", options_.name, std::strerror(err));
    }
    woken = false;
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        woken = true;
      } else if (tag == kRouterTag) {
        router_watch_.marked = true;
      } else if (tag - kFirstPeerTag < peers_.size()) {
        Peer* p = peers_[tag - kFirstPeerTag].get();
        if (p != nullptr && !p->guest) p->watch.marked = true;
      }
    }
  }
  loop_.RunPending(true);
  Flush();  // what was asked for before Stop still leaves
  // Sockets belong to this thread: close them here (guests are told to leave).
  for (auto& p : peers_) {
    if (p && p->guest) WriteEventFd(p->guest_wake_fd);
  }
  Unwatch(router_watch_);
  router_.reset();
  for (auto& p : peers_) {
    if (p) Unwatch(p->watch);
  }
  peers_.clear();
  watches_dirty_ = true;
  loop_.StopWork();
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
