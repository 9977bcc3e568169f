// ZmqTransport's receiving half: reading frames, delivering messages, the
// I/O thread's loop, and guest receivers (a caller waiting for its reply
// reads the socket itself). The sending half is in zmq_transport.cc.
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/frame_pack.h"
#include "common/zmq_check.h"
#include "common/zmq_transport.h"
#include "common/zmq_transport_internal.h"

namespace pstrain {
namespace {

// A packed message's payloads from its frames after the header: the layout
// first, then the data frames.
absl::StatusOr<std::vector<Buffer>> Unpack(const std::vector<Buffer>& frames,
                                           size_t max_payloads) {
  if (frames.empty()) return absl::InvalidArgumentError("packed message without a layout");
  return UnpackPayloads(frames[0], std::span<const Buffer>(frames).subspan(1), max_payloads);
}

}  // namespace

using namespace zmq_internal;  // NOLINT: the transport's own internals

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
    if ((in.envelope.reserved[0] & kPackedFlag) != 0) {
      // The layout frame, then the frames it indexes (frame_pack.h).
      absl::StatusOr<std::vector<Buffer>> unpacked =
          Unpack(in.message.payloads, static_cast<size_t>(options_.limits.max_frames));
      if (!unpacked.ok()) {
        dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      in.message.payloads = *std::move(unpacked);
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
    if (p && p->io_thread_reads() && p->watch.marked) return true;
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
      if (p == nullptr || !p->io_thread_reads() || !p->watch.marked) continue;
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
    if (p != nullptr && p->io_thread_reads() && !p->detached) {
      watch(*p->socket, p->watch, kFirstPeerTag + id);
    }
  }
  watches_dirty_ = false;
}

bool ZmqTransport::ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done,
                                  const GuestWake& wake, absl::Time deadline) {
  if (!wake.valid() || loop_.InLoopThread()) return false;
  if (!loop_.owner().TryEnterGuest()) return false;
  const int fd = ClaimForGuest(peer, wake);
  // What this thread (and others) held back leaves now, as one batch per peer.
  Flush();
  if (fd < 0) {
    loop_.owner().Leave();
    return false;
  }
  bool alive = true, more = false;
  // Read first only when something may be waiting unannounced; otherwise
  // the next reply signals the socket's fd.
  Peer* p = peers_[peer].get();
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
    alive = loop_.owner().WaitAsGuest(fd, wake, std::min(left, kMaxWait));
    if (!alive || done()) break;
  }
  if (alive) {
    ReturnFromGuest(peer, more);
    Flush();
  }
  loop_.owner().Leave();
  return true;
}

int ZmqTransport::ClaimForGuest(PeerId id, const GuestWake& wake) {
  Peer* p = id >= 0 && static_cast<size_t>(id) < peers_.size() ? peers_[id].get() : nullptr;
  if (p == nullptr || !p->socket || p->guest.valid()) return -1;
  if (p->watch.fd < 0) p->watch.fd = SocketFd(*p->socket);
  if (p->watch.fd < 0) return -1;
  p->guest = wake;
  // Out of the I/O thread's set: only the guest wakes for the reply.
  Unwatch(p->watch);
  return p->watch.fd;
}

void ZmqTransport::ReturnFromGuest(PeerId id, bool more) {
  Peer* p = peers_[id].get();
  if (p == nullptr) return;
  p->guest = GuestWake();
  if (!p->socket) return;
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

void ZmqTransport::SetLinger(absl::Duration linger) {
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(linger));
  try {
    if (router_) router_->set(zmq::sockopt::linger, ms);
    for (auto& p : peers_) {
      if (p && p->socket) p->socket->set(zmq::sockopt::linger, ms);
    }
  } catch (const zmq::error_t& e) {
    spdlog::debug("{}: linger: {}", options_.name, e.what());
  }
}

void ZmqTransport::Run() {
  loop_.owner().BindToCurrentThread();
  loop_.owner().BeginWork();
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
    loop_.owner().EndWork(absl::Now() + absl::Milliseconds(timeout_ms));
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    int err = errno;
    loop_.owner().BeginWork();
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
        if (p != nullptr && p->io_thread_reads()) p->watch.marked = true;
      }
    }
  }
  loop_.RunPending(true);
  Flush();  // what was asked for before Stop still leaves
  // ... and really leaves: libzmq writes to TCP on its own thread, and a
  // socket closed with linger 0 drops what it has not written yet (a reply
  // sent just before the process stops, e.g. the acknowledgement a pipeline
  // neighbour waits for). The context's teardown waits for it, this long
  // at most.
  SetLinger(kStopLinger);
  // Sockets belong to this thread: close them here (guests are told to leave).
  for (auto& p : peers_) {
    if (p) p->guest.Notify();
  }
  Unwatch(router_watch_);
  router_.reset();
  for (auto& p : peers_) {
    if (p) Unwatch(p->watch);
  }
  peers_.clear();
  watches_dirty_ = true;
  loop_.owner().StopWork();
}

}  // namespace pstrain
