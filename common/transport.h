// Transport: moves multipart messages between processes.
//
// Every process binds one endpoint that receives requests, and connects to
// the peers it calls. A message is a small header frame plus raw payload
// frames; payloads travel without copying (the Buffer's owner is kept alive
// until the bytes are on the wire). Request/response matching, deadlines and
// retries live one level up, in RpcNode; the transport only carries an
// Envelope (kind + request id) in front of every message.
//
// Threading: one I/O thread per transport owns its sockets and runs the
// message handler and posted closures. All public methods are thread-safe
// unless noted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/buffer.h"

namespace pstrain {

// A message as the application sees it.
struct Message {
  Buffer header;
  std::vector<Buffer> payloads;
};

enum class EnvelopeKind : uint8_t { kRequest = 1, kResponse = 2 };

// The transport's own 16-byte frame in front of every message.
struct Envelope {
  static constexpr uint32_t kMagic = 0x50535431;  // "PST1"
  uint32_t magic = kMagic;
  EnvelopeKind kind = EnvelopeKind::kRequest;
  uint8_t reserved[3] = {0, 0, 0};
  uint64_t request_id = 0;
};
static_assert(sizeof(Envelope) == 16);

// A connection to a peer's endpoint, made by Connect().
using PeerId = int32_t;
constexpr PeerId kNoPeer = -1;

// A message as delivered to the handler.
struct Incoming {
  Envelope envelope;
  Message message;
  // For requests: where to send the reply (opaque to callers).
  std::string reply_route;
  // For responses: the connection it came back on.
  PeerId peer = kNoPeer;
};

struct TransportLimits {
  // Largest frame accepted; larger ones are refused by the socket before any
  // allocation (ZMQ_MAXMSGSIZE).
  int64_t max_frame_bytes = int64_t{1} << 30;
  // Most frames in one message; the rest of a longer message is dropped.
  int max_frames = 1024;
  // Most messages queued from one peer before the socket stops reading it.
  int receive_queue_messages = 1000;
  // Largest message (all frames together); a longer one is dropped whole.
  int64_t max_message_bytes = int64_t{1} << 31;
  // Most bytes of one peer's requests alive at once (received and still
  // held by the handler, e.g. waiting for their reply); a request that would
  // exceed it is dropped and counted (one request is always admitted from
  // a peer holding nothing, so the bound is this plus one message).
  // <= 0: no bound.
  int64_t max_peer_inflight_bytes = int64_t{1} << 30;
};

// CURVE security (ZeroMQ's CurveZMQ): set to encrypt and authenticate.
struct CurveKeys {
  std::string public_key;   // Z85, 40 chars; empty = no CURVE
  std::string secret_key;   // Z85
  std::string server_key;   // Z85 public key of the peers we connect to
  std::vector<std::string> allowed_clients;  // Z85 public keys admitted (ZAP)
};

struct TransportStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t dropped_malformed = 0;   // bad envelope, too many frames, ...
  uint64_t send_failures = 0;       // no connection / unknown route
  uint64_t dropped_over_budget = 0; // requests over max_peer_inflight_bytes
  uint64_t auth_refused = 0;        // connections refused by CURVE authentication
};

class Transport {
 public:
  // Runs on the I/O thread for every well-formed incoming message. Must not
  // block.
  using MessageHandler = std::function<void(Incoming&&)>;
  // Runs on the I/O thread when a request could not be handed to the wire
  // (e.g. no connection yet). `status` is Unavailable.
  using SendFailureHandler = std::function<void(PeerId, uint64_t request_id, absl::Status)>;

  virtual ~Transport() = default;

  // Binds the receive endpoint ("tcp://HOST:PORT", port 0 or * for any) and
  // returns the actual endpoint. Call before Start().
  virtual absl::StatusOr<std::string> Bind(const std::string& endpoint) = 0;
  // Starts the I/O thread.
  virtual absl::Status Start(MessageHandler on_message, SendFailureHandler on_send_failure) = 0;
  // Stops the I/O thread and closes the sockets. Idempotent.
  virtual void Stop() = 0;

  // Starts connecting to `endpoint` (in the background; it reconnects by
  // itself) and returns the id to send on.
  virtual PeerId Connect(const std::string& endpoint) = 0;
  virtual void Disconnect(PeerId peer) = 0;

  // Sends a request on a connection. Failures are reported to the send
  // failure handler, never thrown.
  virtual void SendRequest(PeerId peer, uint64_t request_id, Message message) = 0;
  // Sends a response along the route of an incoming request. Failures
  // (peer gone) are counted and the message dropped.
  virtual void SendResponse(const std::string& route, uint64_t request_id, Message message) = 0;

  // Runs `fn` on the I/O thread.
  virtual void Post(absl::AnyInvocable<void()> fn) = 0;
  virtual void RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) = 0;
  virtual bool InIoThread() const = 0;

  virtual TransportStats stats() const = 0;
};

}  // namespace pstrain
