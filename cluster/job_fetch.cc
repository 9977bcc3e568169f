#include "cluster/job_fetch.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc.h"
#include "common/status.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain {
namespace {

// One try's wait: a coordinator that is up answers in milliseconds.
constexpr absl::Duration kAttempt = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::optional<std::string>> FetchJobSpec(const std::string& endpoint,
                                                        const CurveKeys& curve,
                                                        absl::Duration connect_timeout) {
  ZmqTransportOptions t;
  t.name = "job";
  t.curve = curve;
  RpcNode node(std::make_unique<ZmqTransport>(t));
  PS_RETURN_IF_ERROR(node.Start(nullptr));
  const PeerId peer = node.Connect(endpoint);
  proto::StoreRequest req;
  req.keys = {kJobSpecKey};
  req.wait_ms = 0;
  proto::Header h;
  h.type = proto::MsgType::kStoreGet;
  h.sender_role = proto::Role::kTool;
  const absl::Time give_up = absl::Now() + std::max(connect_timeout, kAttempt);
  absl::Status last;
  bool warned = false;
  while (absl::Now() < give_up) {
    absl::StatusOr<Message> reply = node.Call(peer, proto::Encode(h, req), absl::Now() + kAttempt).Wait();
    if (!reply.ok()) {
      last = reply.status();
      if (!warned) {
        spdlog::info("waiting for the coordinator at {} ...", endpoint);
        warned = true;
      }
      continue;  // not up yet (the call waited its second)
    }
    PS_ASSIGN_OR_RETURN(proto::Decoded d, proto::Decode(std::move(*reply)));
    absl::Status remote = proto::RemoteStatus(d.header());
    node.Stop();
    if (absl::IsNotFound(remote)) return std::optional<std::string>();
    if (!remote.ok()) return remote;
    PS_RETURN_IF_ERROR(d.CheckPayload(0, proto::DType::kU8));
    const Buffer& b = d.payload(0);
    return std::optional<std::string>(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
  }
  node.Stop();
  return absl::UnavailableError(absl::StrCat("coordinator ", endpoint, " unreachable for ",
                                             absl::FormatDuration(connect_timeout),
                                             " (asking for its job): ", last.message()));
}

}  // namespace pstrain
