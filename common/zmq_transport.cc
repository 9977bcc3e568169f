#include "common/zmq_transport.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/zmq_check.h"

namespace pstrain {
namespace {

// Frames up to this size are copied: cheaper than an owner allocation and
// ZeroMQ stores them inline anyway.
constexpr size_t kCopyBelowBytes = 512;
// Messages read from one socket before servicing the others again.
constexpr int kReadBatch = 256;

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

}  // namespace

struct ZmqTransport::Peer {
  std::string endpoint;
  std::unique_ptr<zmq::socket_t> socket;  // null once disconnected
};

ZmqTransport::ZmqTransport(ZmqTransportOptions options)
    : options_(std::move(options)), context_(1) {
  context_.set(zmq::ctxopt::blocky, 0);
}

ZmqTransport::~ZmqTransport() {
  Stop();
  router_.reset();
  peers_.clear();
}

absl::Status ZmqTransport::ApplyCommonOptions(zmq::socket_t& socket) {
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::linger, 0));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::maxmsgsize, options_.limits.max_frame_bytes));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::rcvhwm, options_.limits.receive_queue_messages));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::sndhwm, 0));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::tcp_keepalive, 1));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ZmqTransport::Bind(const std::string& endpoint) {
  if (running_) return absl::FailedPreconditionError("Bind after Start");
  auto router = std::make_unique<zmq::socket_t>();
  PS_ZMQ_CHECK(*router = zmq::socket_t(context_, zmq::socket_type::router));
  PS_RETURN_IF_ERROR(ApplyCommonOptions(*router));
  PS_ZMQ_CHECK(router->set(zmq::sockopt::router_mandatory, 1));
  std::string actual;
  try {
    router->bind(NormalizeEndpoint(endpoint));
    actual = router->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return internal::ZmqError(e, absl::StrCat("bind ", endpoint).c_str(), __FILE__, __LINE__);
  }
  router_ = std::move(router);
  poll_items_dirty_ = true;
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
  loop_.Post([] {});  // wake the poll
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
    // Queue only on completed connections: a request to a peer that is not
    // (or no longer) connected fails fast and is retried by the caller,
    // instead of reaching a restarted peer long after it was sent.
    socket->set(zmq::sockopt::immediate, 1);
    socket->set(zmq::sockopt::reconnect_ivl, 20);
    socket->set(zmq::sockopt::reconnect_ivl_max, 1000);
    socket->connect(endpoint);
    peer->socket = std::move(socket);
  } catch (const zmq::error_t& e) {
    spdlog::error("{}: cannot connect to {}: {}", options_.name, endpoint, e.what());
  }
  peers_[id] = std::move(peer);
  poll_items_dirty_ = true;
}

void ZmqTransport::Disconnect(PeerId peer) {
  auto fn = [this, peer] {
    if (peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer]) {
      peers_[peer]->socket.reset();
      poll_items_dirty_ = true;
    }
  };
  if (InIoThread()) {
    fn();
  } else {
    loop_.Post(std::move(fn));
  }
}

bool ZmqTransport::SendFrames(zmq::socket_t& socket, const std::string* route,
                              const Envelope& env, Message& message) {
  try {
    if (route != nullptr) {
      zmq::message_t rf(route->data(), route->size());
      if (!socket.send(rf, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    }
    zmq::message_t ef(&env, sizeof(env));
    if (!socket.send(ef, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    // Once the first frame is accepted the rest of the message is too.
    size_t n = message.payloads.size();
    zmq::message_t hf = ToFrame(message.header);
    socket.send(hf, n > 0 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    uint64_t bytes = sizeof(env) + message.header.size();
    for (size_t i = 0; i < n; ++i) {
      zmq::message_t pf = ToFrame(message.payloads[i]);
      bytes += message.payloads[i].size();
      socket.send(pf, i + 1 < n ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    messages_sent_.fetch_add(1, std::memory_order_relaxed);
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    return true;
  } catch (const zmq::error_t& e) {
    if (e.num() != EHOSTUNREACH && e.num() != EAGAIN) {
      spdlog::warn("{}: send failed: {}", options_.name, e.what());
    }
    return false;
  }
}

void ZmqTransport::SendRequest(PeerId peer, uint64_t request_id, Message message) {
  auto fn = [this, peer, request_id, m = std::move(message)]() mutable {
    Envelope env;
    env.kind = EnvelopeKind::kRequest;
    env.request_id = request_id;
    bool ok = peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer] &&
              peers_[peer]->socket && SendFrames(*peers_[peer]->socket, nullptr, env, m);
    if (!ok) {
      send_failures_.fetch_add(1, std::memory_order_relaxed);
      if (on_send_failure_) {
        on_send_failure_(peer, request_id,
                         absl::UnavailableError(absl::StrCat(
                             "no connection to ",
                             peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer]
                                 ? peers_[peer]->endpoint
                                 : absl::StrCat("peer ", peer))));
      }
    }
  };
  if (InIoThread()) {
    fn();
  } else {
    loop_.Post(std::move(fn));
  }
}

void ZmqTransport::SendResponse(const std::string& route, uint64_t request_id, Message message) {
  auto fn = [this, route, request_id, m = std::move(message)]() mutable {
    Envelope env;
    env.kind = EnvelopeKind::kResponse;
    env.request_id = request_id;
    if (!router_ || !SendFrames(*router_, &route, env, m)) {
      send_failures_.fetch_add(1, std::memory_order_relaxed);
    }
  };
  if (InIoThread()) {
    fn();
  } else {
    loop_.Post(std::move(fn));
  }
}

bool ZmqTransport::ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames) {
  bool ok = true;
  const size_t max_frames = static_cast<size_t>(options_.limits.max_frames) + 3;
  while (frames.back().more()) {
    zmq::message_t next;
    try {
      // The rest of a multipart message is already here: this cannot block.
      (void)socket.recv(next, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      return false;
    }
    if (frames.size() >= max_frames) {
      ok = false;  // keep draining, drop the whole message
      frames.back() = std::move(next);
      continue;
    }
    frames.push_back(std::move(next));
  }
  return ok;
}

void ZmqTransport::Deliver(std::vector<zmq::message_t>& frames, size_t first, std::string route,
                           PeerId peer) {
  if (frames.size() < first + 2 || frames[first].size() != sizeof(Envelope)) {
    dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Incoming in;
  std::memcpy(&in.envelope, frames[first].data(), sizeof(Envelope));
  EnvelopeKind expected = peer == kNoPeer ? EnvelopeKind::kRequest : EnvelopeKind::kResponse;
  if (in.envelope.magic != Envelope::kMagic || in.envelope.kind != expected) {
    dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t bytes = 0;
  for (size_t i = first; i < frames.size(); ++i) bytes += frames[i].size();
  in.message.header = FromFrame(std::move(frames[first + 1]));
  in.message.payloads.reserve(frames.size() - first - 2);
  for (size_t i = first + 2; i < frames.size(); ++i) {
    in.message.payloads.push_back(FromFrame(std::move(frames[i])));
  }
  in.reply_route = std::move(route);
  in.peer = peer;
  messages_received_.fetch_add(1, std::memory_order_relaxed);
  bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  if (on_message_) on_message_(std::move(in));
}

void ZmqTransport::DrainRouter() {
  std::vector<zmq::message_t> frames;
  for (int i = 0; i < kReadBatch && router_; ++i) {
    zmq::message_t first;
    try {
      if (!router_->recv(first, zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t& e) {
      spdlog::warn("{}: receive failed: {}", options_.name, e.what());
      return;
    }
    frames.clear();
    frames.push_back(std::move(first));
    if (!ReadFrames(*router_, frames)) {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::string route = frames[0].to_string();
    Deliver(frames, 1, std::move(route), kNoPeer);
  }
}

void ZmqTransport::DrainDealer(Peer& peer_ref) {
  std::vector<zmq::message_t> frames;
  PeerId id = kNoPeer;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i].get() == &peer_ref) id = static_cast<PeerId>(i);
  }
  for (int i = 0; i < kReadBatch; ++i) {
    // The handler may disconnect this peer: re-check every message.
    if (id == kNoPeer || !peers_[id] || !peers_[id]->socket) return;
    zmq::socket_t& socket = *peers_[id]->socket;
    zmq::message_t first;
    try {
      if (!socket.recv(first, zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t&) {
      return;
    }
    frames.clear();
    frames.push_back(std::move(first));
    if (!ReadFrames(socket, frames)) {
      dropped_malformed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    Deliver(frames, 0, std::string(), id);
  }
}

void ZmqTransport::PollOnce() {
  // Layout: [0] wake fd, [1] router (if bound), then one item per live peer.
  if (poll_items_dirty_) {
    poll_items_.clear();
    poll_peers_.clear();
    poll_items_.push_back({nullptr, loop_.wake_fd(), ZMQ_POLLIN, 0});
    if (router_) poll_items_.push_back({router_->handle(), 0, ZMQ_POLLIN, 0});
    for (auto& p : peers_) {
      if (p && p->socket) {
        poll_items_.push_back({p->socket->handle(), 0, ZMQ_POLLIN, 0});
        poll_peers_.push_back(p.get());
      }
    }
    poll_items_dirty_ = false;
  }
  absl::Duration wait = loop_.TimeToNextTimer(absl::Milliseconds(200));
  long timeout_ms = static_cast<long>(absl::ToInt64Milliseconds(wait + absl::Microseconds(999)));
  int rc = zmq_poll(poll_items_.data(), static_cast<int>(poll_items_.size()), timeout_ms);
  if (rc < 0 && zmq_errno() != EINTR) {
    spdlog::error("{}: zmq_poll: {}", options_.name, zmq_strerror(zmq_errno()));
  }
  bool woken = rc > 0 && (poll_items_[0].revents & ZMQ_POLLIN);
  bool router_ready = rc > 0 && router_ && (poll_items_[1].revents & ZMQ_POLLIN);
  size_t first_peer = router_ ? 2 : 1;
  std::vector<Peer*> ready;
  if (rc > 0) {
    for (size_t i = first_peer; i < poll_items_.size(); ++i) {
      if (poll_items_[i].revents & ZMQ_POLLIN) ready.push_back(poll_peers_[i - first_peer]);
    }
  }
  loop_.RunPending(woken);
  if (router_ready) DrainRouter();
  for (Peer* p : ready) DrainDealer(*p);
  loop_.RunDueTimers();
}

void ZmqTransport::Run() {
  loop_.BindToCurrentThread();
  while (running_.load(std::memory_order_relaxed)) PollOnce();
  loop_.RunPending(true);
  // Sockets belong to this thread: close them here.
  router_.reset();
  peers_.clear();
  poll_items_dirty_ = true;
}

TransportStats ZmqTransport::stats() const {
  TransportStats s;
  s.messages_sent = messages_sent_.load();
  s.messages_received = messages_received_.load();
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  s.dropped_malformed = dropped_malformed_.load();
  s.send_failures = send_failures_.load();
  return s;
}

}  // namespace pstrain
