// ZmqTransport's connections: one DEALER socket per peer, connected by
// address only.
//
// libzmq would resolve the host of "tcp://NAME:PORT" in its context's I/O
// thread, on every reconnect too, and a name that hangs would stall every
// socket of the process (heartbeats included). So a named peer's socket is
// made at once and connected when the Resolver (common/resolver.h) answers,
// on its own threads, within its timeout; until then sends to the peer fail
// fast (Unavailable, through the send failure handler) like sends to any
// peer not connected. A send that fails for lack of a connection resolves
// the name again (at most once a kReResolveEvery per peer): a new address
// replaces the old one on the same socket. A name that stops resolving
// keeps the old address and is logged once per streak; the peer then looks
// dead to the layers above (failing sends, missing heartbeats), and every
// other connection goes on. Lookups answer by posting to the loop.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/security/curve_socket.h"
#include "common/zmq_transport.h"
#include "common/zmq_transport_internal.h"

namespace pstrain {

using namespace zmq_internal;  // NOLINT: the transport's own internals

// Where lookups answer: the transport's loop, while the transport lives.
struct ZmqTransport::ResolveSink {
  absl::Mutex mu;
  ZmqTransport* transport ABSL_GUARDED_BY(mu) = nullptr;
};

void ZmqTransport::InitResolution() {
  resolver_ = options_.resolver ? options_.resolver : Resolver::Default();
  resolve_sink_ = std::make_shared<ResolveSink>();
  absl::MutexLock lock(&resolve_sink_->mu);
  resolve_sink_->transport = this;
}

void ZmqTransport::EndResolution() {
  // After this no answer reaches the loop (one being posted has finished).
  absl::MutexLock lock(&resolve_sink_->mu);
  resolve_sink_->transport = nullptr;
}

PeerId ZmqTransport::Connect(const std::string& endpoint) {
  PeerId id = next_peer_.fetch_add(1);
  if (loop_.InLoopThread()) {
    loop_.owner().AssertHeld();
    DoConnect(id, endpoint);
  } else {
    loop_.Post([this, id, endpoint] {
      loop_.owner().AssertHeld();  // posted closures run as the loop
      DoConnect(id, endpoint);
    });
  }
  return id;
}

void ZmqTransport::DoConnect(PeerId id, const std::string& endpoint) {
  if (static_cast<size_t>(id) >= peers_.size()) peers_.resize(id + 1);
  auto peer = std::make_unique<Peer>();
  peer->endpoint = endpoint;
  const bool named = NamedTcpHost(endpoint, &peer->host, &peer->port);
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
      if (!named) {
        if (absl::StartsWith(endpoint, "tcp://[")) socket->set(zmq::sockopt::ipv6, 1);
        socket->connect(endpoint);
        peer->connected = endpoint;
      }
      peer->socket = std::move(socket);
    }
  } catch (const zmq::error_t& e) {
    spdlog::error("{}: cannot connect to {}: {}", options_.name, endpoint, e.what());
  }
  const bool resolve = named && peer->socket != nullptr;
  peers_[id] = std::move(peer);
  watches_dirty_ = true;  // registered before the I/O thread waits again
  if (resolve) StartResolve(id);
}

void ZmqTransport::StartResolve(PeerId id) {
  Peer& p = *peers_[id];
  p.resolving = true;
  p.last_resolve = absl::Now();
  resolver_->Resolve(p.host, [sink = resolve_sink_, id](absl::StatusOr<std::string> address) {
    absl::MutexLock lock(&sink->mu);
    ZmqTransport* t = sink->transport;
    if (t == nullptr) return;  // the transport is gone
    t->loop_.Post([t, id, address = std::move(address)]() mutable {
      t->loop_.owner().AssertHeld();
      t->OnResolved(id, std::move(address));
    });
  });
}

void ZmqTransport::ReResolveSoon(PeerId id) {
  Peer* p = id >= 0 && static_cast<size_t>(id) < peers_.size() ? peers_[id].get() : nullptr;
  if (p == nullptr || p->host.empty() || !p->socket || p->resolving) return;
  if (absl::Now() - p->last_resolve < kReResolveEvery) return;
  StartResolve(id);
}

void ZmqTransport::OnResolved(PeerId id, absl::StatusOr<std::string> address) {
  Peer* p = static_cast<size_t>(id) < peers_.size() ? peers_[id].get() : nullptr;
  if (p == nullptr || !p->socket) return;  // disconnected meanwhile
  p->resolving = false;
  if (!address.ok()) {
    p->resolve_error = std::string(address.status().message());
    if (!p->resolve_failing) {
      p->resolve_failing = true;
      spdlog::warn("{}: peer {}: {}; {}; trying again at most once a second", options_.name,
                   p->endpoint, p->resolve_error,
                   p->connected.empty() ? std::string("not connected")
                                        : absl::StrCat("keeping ", p->connected));
    }
    return;
  }
  if (p->resolve_failing) {
    spdlog::info("{}: peer {}: {} resolves again, to {}", options_.name, p->endpoint, p->host,
                 *address);
    p->resolve_failing = false;
  }
  p->resolve_error.clear();
  const std::string target = TcpEndpoint(*address, p->port);
  if (target == p->connected) return;
  try {
    if (!p->connected.empty()) {
      spdlog::info("{}: peer {} moved from {} to {}", options_.name, p->endpoint, p->connected,
                   target);
      try {
        p->socket->disconnect(p->connected);
      } catch (const zmq::error_t&) {
        // Never connected completely: nothing to undo.
      }
      p->connected.clear();
    }
    if (address->find(':') != std::string::npos) p->socket->set(zmq::sockopt::ipv6, 1);
    p->socket->connect(target);
    p->connected = target;
  } catch (const zmq::error_t& e) {
    spdlog::error("{}: cannot connect to {} ({}): {}", options_.name, p->endpoint, target,
                  e.what());
  }
  if (p->io_thread_reads()) p->watch.marked = true;
}

std::string ZmqTransport::Peer::NotConnectedWhy() const {
  if (!resolve_error.empty()) return absl::StrCat("no connection to ", endpoint, " (", resolve_error, ")");
  if (!host.empty() && connected.empty()) {
    return absl::StrCat("no connection to ", endpoint, " (resolving ", host, ")");
  }
  return absl::StrCat("no connection to ", endpoint);
}

void ZmqTransport::Disconnect(PeerId peer) {
  // Closing a socket changes what the I/O thread polls: always its job.
  if (OnIoThread()) {
    loop_.owner().AssertHeld();
    DoDisconnect(peer);
  } else {
    loop_.Post([this, peer] {
      loop_.owner().AssertHeld();
      DoDisconnect(peer);
    });
  }
}

void ZmqTransport::DoDisconnect(PeerId peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer]) return;
  Peer& p = *peers_[peer];
  Unwatch(p.watch);
  p.guest.Notify();  // a guest reading it stops
  p.socket.reset();
}

}  // namespace pstrain
