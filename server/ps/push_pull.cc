// kPushPull: a worker's push of step t and its pull of a later step, sent
// to a server as one message (worker/kv_client.h, KvClient::PushPull). The
// server serves the two inner requests as it would serve them arriving back
// to back on one connection (the push first, so the pull reads it under
// ASP, and under BSP it is summed before the pull parks for its step), and
// answers the bundle once: with the pull's reply when the push succeeded,
// with the push's error otherwise. A step then costs one request and one
// reply per server instead of two of each.
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto_msgs/codec.h"
#include "server/ps/parameter_server.h"

namespace pstrain::server {
namespace {

using proto::Decoded;
using proto::MsgType;

// The bundle's one reply, sent when both inner requests have answered
// (from the I/O thread or, with executor threads, their completions).
class JointReply {
 public:
  JointReply(RpcNode* node, const RpcRequest& bundle) : node_(node), route_(bundle.route), id_(bundle.id) {}

  // The reply sink of inner request `k` (0: the push, 1: the pull).
  std::shared_ptr<std::function<void(Message)>> Sink(std::shared_ptr<JointReply> self, int k) {
    return std::make_shared<std::function<void(Message)>>(
        [self = std::move(self), k](Message m) { self->Set(k, std::move(m)); });
  }

 private:
  void Set(int k, Message m) {
    Message send;
    {
      absl::MutexLock lock(&mu_);
      if (replies_[k].has_value()) return;  // answered once already
      replies_[k] = std::move(m);
      if (!replies_[0] || !replies_[1]) return;
      send = std::move(Failed(*replies_[0]) ? *replies_[0] : *replies_[1]);
    }
    node_->Reply(route_, id_, std::move(send));
  }

  static bool Failed(const Message& reply) {
    absl::StatusOr<Decoded> d = proto::Decode(reply);
    return !d.ok() || d->header().status_code != 0;
  }

  RpcNode* const node_;
  const std::string route_;
  const uint64_t id_;
  absl::Mutex mu_;
  std::optional<Message> replies_[2] ABSL_GUARDED_BY(mu_);
};

}  // namespace

void ParameterServer::OnPushPull(const Decoded& d, const RpcRequest& req) {
  auto inner = proto::SplitBundle(d, 2);
  if (!inner.ok()) return ReplyError(req, inner.status());
  if (inner->size() != 2) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat(
                               "PushPull: a bundle of ", inner->size(),
                               " messages, expected a push and a pull")));
  }
  absl::StatusOr<Decoded> push = proto::Decode((*inner)[0]);
  absl::StatusOr<Decoded> pull = proto::Decode((*inner)[1]);
  if (!push.ok()) return ReplyError(req, Annotate(push.status(), "PushPull's push"));
  if (!pull.ok()) return ReplyError(req, Annotate(pull.status(), "PushPull's pull"));
  if (push->type() != MsgType::kPush || pull->type() != MsgType::kPull) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat(
                               "PushPull: carries ", proto::MsgTypeName(push->type()), " and ",
                               proto::MsgTypeName(pull->type()), ", expected Push and Pull")));
  }
  const proto::Header& h = d.header();
  for (const Decoded* m : {&*push, &*pull}) {
    if (m->header().sender_role != h.sender_role || m->header().sender_rank != h.sender_rank) {
      return ReplyError(req, absl::InvalidArgumentError(
                                 "PushPull: an inner message from another sender than the bundle"));
    }
  }
  auto joint = std::make_shared<JointReply>(node_.get(), req);
  RpcRequest push_req{req.id, req.route, (*inner)[0], joint->Sink(joint, 0)};
  RpcRequest pull_req{req.id, req.route, (*inner)[1], joint->Sink(joint, 1)};
  OnPush(*std::move(push), std::move(push_req));
  OnPull(*std::move(pull), std::move(pull_req));
}

}  // namespace pstrain::server
