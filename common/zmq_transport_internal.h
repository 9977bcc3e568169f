// Internals shared by the two halves of ZmqTransport: zmq_transport.cc
// (sockets, connections, sending) and zmq_transport_receive.cc (reading,
// delivering, the I/O loop and guest receivers). Not part of the API.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "common/resolver.h"
#include "common/zmq_transport.h"

namespace pstrain::zmq_internal {

// Frames up to this size are copied: cheaper than an owner allocation and
// ZeroMQ stores them inline anyway.
constexpr size_t kCopyBelowBytes = 512;
// ZeroMQ messages read from one socket before servicing the others again.
constexpr int kReadBatch = 256;
// Longest wait of the I/O thread when no timer is due (it re-checks `running_`).
constexpr absl::Duration kMaxWait = absl::Milliseconds(200);
// How long a stopping transport lets libzmq write what is queued.
constexpr absl::Duration kStopLinger = absl::Milliseconds(200);
// Its longest wait while other threads hold requests back: the bound on how
// long a request nobody waits for stays unsent.
constexpr absl::Duration kHeldWait = absl::Milliseconds(5);
// Shortest time between two lookups of one peer's host name.
constexpr absl::Duration kReResolveEvery = absl::Seconds(1);
// RPC messages in one ZeroMQ message.
constexpr size_t kMaxBatch = 64;
// envelope.reserved[0]: the payload count is in reserved[1..2].
constexpr uint8_t kBatchedFlag = 1;
// envelope.reserved[0]: the payloads are packed (frame_pack.h).
constexpr uint8_t kPackedFlag = 2;
// epoll tags: the wake fd, the router, then 2 + PeerId.
constexpr uint64_t kWakeTag = 0;
constexpr uint64_t kRouterTag = 1;
constexpr uint64_t kFirstPeerTag = 2;
constexpr int kMaxEvents = 64;

inline int TimeoutMs(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(d + absl::Microseconds(999)));
}

inline void FreeOwner(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}

inline zmq::message_t ToFrame(const Buffer& b) {
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

inline Buffer FromFrame(zmq::message_t&& frame) {
  auto addr = reinterpret_cast<uintptr_t>(frame.data());
  if (frame.size() <= kCopyBelowBytes || addr % 8 != 0) {
    return Buffer::Copy(frame.data(), frame.size());
  }
  auto holder = std::make_shared<zmq::message_t>(std::move(frame));
  return Buffer(holder->data(), holder->size(), holder);
}

// ZeroMQ wants "*" for an ephemeral port.
inline std::string NormalizeEndpoint(const std::string& endpoint) {
  if (absl::StartsWith(endpoint, "tcp://") && absl::EndsWith(endpoint, ":0")) {
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  }
  return endpoint;
}

// "tcp://NAME:PORT" with NAME a host name to look up: true, with NAME and
// PORT. False for an IP literal ("tcp://10.0.0.5:7000", "tcp://[::1]:7000"),
// other transports, and the source-address form ("tcp://SRC;HOST:PORT"),
// which libzmq parses itself.
inline bool NamedTcpHost(const std::string& endpoint, std::string* host, std::string* port) {
  if (!absl::StartsWith(endpoint, "tcp://")) return false;
  const std::string rest = endpoint.substr(6);
  if (rest.find(';') != std::string::npos || absl::StartsWith(rest, "[")) return false;
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = rest.substr(0, colon);
  if (h == "*" || IsNumericHost(h)) return false;
  *host = std::move(h);
  *port = rest.substr(colon + 1);
  return true;
}

// The endpoint of `address` (an IP literal, IPv6 without brackets) and `port`.
inline std::string TcpEndpoint(const std::string& address, const std::string& port) {
  if (address.find(':') != std::string::npos) return "tcp://[" + address + "]:" + port;
  return "tcp://" + address + ":" + port;
}

inline int SocketFd(zmq::socket_t& socket) {
  try {
    return static_cast<int>(socket.get(zmq::sockopt::fd));
  } catch (const zmq::error_t&) {
    return -1;
  }
}


// Moves up to kMaxBatch of out[i, end) into one batch whose frames a
// receiver accepts as one message (a single bigger message goes alone);
// returns how many.
template <class Out>
size_t TakeBatch(std::vector<Out>& out, size_t i, size_t end, size_t max_frames, uint64_t* ids,
                 Message** msgs) {
  size_t n = 0, frames = 0;
  while (i + n < end && n < kMaxBatch) {
    size_t f = 2 + out[i + n].message.payloads.size();
    if (n > 0 && frames + f > max_frames) break;
    frames += f;
    ids[n] = out[i + n].id;
    msgs[n] = &out[i + n].message;
    ++n;
  }
  return n;
}

// Cuts out[begin, end) into ZeroMQ messages (TakeBatch), one per Next():
// the one loop of the request and the response paths.
//
//   for (Batches<Out> b(out, begin, end, max_frames); b.Next();) Send(b.ids, b.msgs, b.n);
template <typename Out>
struct Batches {
  Batches(std::vector<Out>& out, size_t begin, size_t end, size_t max_frames)
      : out(out), next(begin), end(end), max_frames(max_frames) {}
  bool Next() {
    if (next >= end) return false;
    n = TakeBatch(out, next, end, max_frames, ids, msgs);
    next += n;
    return true;
  }

  std::vector<Out>& out;
  size_t next, end, max_frames;
  uint64_t ids[kMaxBatch];
  Message* msgs[kMaxBatch];
  size_t n = 0;
};

}  // namespace pstrain::zmq_internal

namespace pstrain {

// Loop state, like peers_ that holds it.
struct ZmqTransport::Peer {
  std::string endpoint;
  std::unique_ptr<zmq::socket_t> socket;  // null once disconnected
  Watch watch;
  // valid(): a guest reads this socket (it is out of the epoll set).
  GuestWake guest;
  // Requests sent and messages read on this socket: when equal, no reply
  // can be on its way, so a send cannot have consumed a wake-up signal.
  uint64_t requests_sent = 0;
  uint64_t messages_read = 0;
  // Out of the epoll set although no guest reads it: a guest left it empty
  // with nothing in flight, so nothing can arrive until a request is sent.
  // The next send by anyone but the socket's own guest puts it back (so the
  // thread that sends and then waits for the reply skips two epoll_ctl).
  bool detached = false;
  // Resolution (zmq_transport_connect.cc). `host` empty: `endpoint` is an
  // address, connected as it is.
  std::string host, port;
  std::string connected;  // the address endpoint the socket connects to; "" none
  bool resolving = false;        // a lookup is on its way
  bool resolve_failing = false;  // the last lookup failed (logged once)
  absl::Time last_resolve = absl::InfinitePast();
  std::string resolve_error;  // of the last lookup; "" when it answered

  // The send failure's message: the endpoint, and why there is no connection.
  std::string NotConnectedWhy() const;

  bool in_flight() const { return requests_sent != messages_read; }
  // Open and read by the I/O thread (no guest has taken it).
  bool io_thread_reads() const { return socket && !guest.valid(); }
  // The calling thread is the guest that reads it.
  bool read_by_calling_guest() const { return guest.valid() && guest.IsCallingThread(); }
};

}  // namespace pstrain
