// CURVE settings of the transport's ZeroMQ sockets: the bound socket is a
// CURVE server that asks the context's ZapHandler about every client; the
// connecting sockets are CURVE clients that know the servers' public key.
#pragma once

#include <zmq.hpp>

#include "absl/status/status.h"
#include "common/transport.h"

namespace pstrain {

// The ZAP domain of pstrain's bound sockets.
inline constexpr char kZapDomain[] = "pstrain";

inline bool CurveEnabled(const CurveKeys& keys) { return !keys.public_key.empty(); }

// InvalidArgument (naming the key) unless every key is valid Z85;
// FailedPrecondition without CURVE support.
absl::Status ValidateCurveKeys(const CurveKeys& keys);

// REQUIRES: before bind/connect. A ZapHandler must run in the socket's
// context before a server socket binds.
absl::Status MakeCurveServer(zmq::socket_t& socket, const CurveKeys& keys);
absl::Status MakeCurveClient(zmq::socket_t& socket, const CurveKeys& keys);

}  // namespace pstrain
