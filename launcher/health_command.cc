// pstrain health: a liveness probe for containers and scripts. Sends one
// Ping to a node's endpoint and exits 0 when it answers OK before the
// deadline, 1 otherwise (2 for bad flags). Docker healthchecks and
// Kubernetes exec probes call it.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/rpc.h"
#include "common/security/curve_keys.h"
#include "common/zmq_transport.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "proto_msgs/codec.h"

namespace pstrain::launcher {
namespace {

struct HealthOptions {
  std::string endpoint;
  absl::Duration timeout = absl::Seconds(3);  // --timeout's default
  bool any_reply = false;
  CurveKeys curve;  // --auth=curve
};

// Pings `o.endpoint` once. OK when it answered OK (or, with `any_reply`,
// answered at all) before the deadline; the transport or remote error
// otherwise.
absl::Status Probe(const HealthOptions& o) {
  ZmqTransportOptions t;
  t.name = "health";
  t.curve = o.curve;
  RpcNode node(std::make_unique<ZmqTransport>(t));
  PS_RETURN_IF_ERROR(node.Start(nullptr));
  PeerId peer = node.Connect(o.endpoint);
  proto::Header h;
  h.type = proto::MsgType::kPing;
  h.sender_role = proto::Role::kTool;
  absl::StatusOr<Message> reply =
      node.Call(peer, proto::EncodeHeaderOnly(h), absl::Now() + o.timeout).Wait();
  node.Stop();
  if (!reply.ok()) return reply.status();
  absl::StatusOr<proto::Decoded> decoded = proto::Decode(std::move(*reply));
  if (!decoded.ok()) return decoded.status();
  absl::Status remote = proto::RemoteStatus(decoded->header());
  // A well-formed error reply still proves that the node is alive.
  if (remote.ok() || o.any_reply) return absl::OkStatus();
  return remote;
}

std::string EnvOr(const char* name, const std::string& otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : otherwise;
}

}  // namespace

namespace {

FlagSet HealthFlags() {
  FlagSet flags;
  flags.Define("endpoint", "", "Endpoint of the node to probe, e.g. tcp://localhost:7000.")
      .Define("timeout", "3", "Seconds to wait for the answer.")
      .Define("any_reply", "false",
              "Count any well-formed reply as healthy, also an error reply (workers answer "
              "requests they do not serve with an error).")
      .Define("quiet", "false", "Print nothing; only the exit code tells.")
      // Defaults from the container's environment, like the nodes it probes.
      .Define("auth", EnvOr("PSTRAIN_AUTH", "none"),
              "none | curve: as the cluster's nodes (see pstrain keygen; default $PSTRAIN_AUTH).")
      .Define("keys_dir", EnvOr("PSTRAIN_KEYS_DIR", ""),
              "With --auth=curve: the folder of the keys (default $PSTRAIN_KEYS_DIR).")
      .Define("key_name", "cluster",
              "With --auth=curve: the key pair to use, NAME.key in --keys_dir (a client key "
              "made by pstrain keygen --client NAME will do).");
  return flags;
}

}  // namespace

std::string HealthHelp() {
  return absl::StrCat(
      "usage: pstrain health --endpoint=tcp://HOST:PORT [--timeout=SECONDS]\n\n"
      "Sends one Ping to a pstrain node (coordinator, server, worker). Exit code 0: it\n"
      "answered OK within the timeout; 1: it did not (unreachable, too slow, or an error\n"
      "reply); 2: bad flags. Meant for container healthchecks and readiness probes.\n\n",
      HealthFlags().Help());
}

absl::Status RunHealth(const std::vector<std::string>& argv) {
  FlagSet flags = HealthFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  HealthOptions o;
  o.endpoint = flags.Get("endpoint");
  PS_ASSIGN_OR_RETURN(double timeout, flags.GetDouble("timeout"));
  if (o.endpoint.empty()) return UsageError("--endpoint is required");
  if (!(timeout > 0)) return UsageError("--timeout must be positive");
  auto curve = CurveKeysForAuth(flags.Get("auth"), flags.Get("keys_dir"), flags.Get("key_name"));
  if (!curve.ok()) return UsageError(curve.status().ToString());
  o.curve = *curve;
  o.timeout = absl::Seconds(timeout);
  o.any_reply = flags.GetBool("any_reply");
  const bool quiet = flags.GetBool("quiet");
  const absl::Time start = absl::Now();
  absl::Status result = Probe(o);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!result.ok()) {
    // Exit 1, and with --quiet nothing printed.
    return WithExitCode(
        absl::UnavailableError(quiet ? "" : absl::StrFormat("%s unhealthy after %.0f ms: %s",
                                                            o.endpoint, ms, result.ToString())),
        1);
  }
  if (!quiet) std::printf("%s ok (%.1f ms)\n", o.endpoint.c_str(), ms);
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
