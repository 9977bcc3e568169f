#include "common/security/curve_socket.h"

#include "common/security/curve_keys.h"
#include "common/zmq_check.h"

namespace pstrain {

absl::Status ValidateCurveKeys(const CurveKeys& keys) {
  PS_RETURN_IF_ERROR(CheckCurveAvailable());
  PS_RETURN_IF_ERROR(CheckZ85Key(keys.public_key, "CURVE public key"));
  PS_RETURN_IF_ERROR(CheckZ85Key(keys.secret_key, "CURVE secret key"));
  PS_RETURN_IF_ERROR(CheckZ85Key(keys.server_key, "CURVE server key"));
  for (const std::string& k : keys.allowed_clients) {
    PS_RETURN_IF_ERROR(CheckZ85Key(k, "authorized CURVE key"));
  }
  return absl::OkStatus();
}

absl::Status MakeCurveServer(zmq::socket_t& socket, const CurveKeys& keys) {
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::curve_server, 1));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::curve_secretkey, keys.secret_key));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::zap_domain, kZapDomain));
#ifdef ZMQ_ZAP_ENFORCE_DOMAIN
  // Refuse everyone should the handler be missing (draft API only).
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::zap_enforce_domain, 1));
#endif
  return absl::OkStatus();
}

absl::Status MakeCurveClient(zmq::socket_t& socket, const CurveKeys& keys) {
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::curve_serverkey, keys.server_key));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::curve_publickey, keys.public_key));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::curve_secretkey, keys.secret_key));
  return absl::OkStatus();
}

}  // namespace pstrain
