// ClusterLink: what the coordinator's parts (checkpoints, elastic workers,
// recovery) may use of its core: the RPC node, the servers' current peers,
// the cluster's epoch and whether the job is ending. The Coordinator
// implements it. Parts read the core through it and never change the
// core's state: they return what the core should do, or call the `done` of
// their own asynchronous operations.
//
// Not thread-safe: the coordinator's I/O thread only.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/rpc.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

// A request answered later: where its reply goes.
struct Parked {
  std::string route;
  uint64_t id = 0;
};

class ClusterLink {
 public:
  virtual RpcNode& node() = 0;
  virtual int num_servers() const = 0;
  // Server `rank`'s peer now (a replacement server has a new one), or
  // kNoPeer before it joined.
  virtual PeerId server_peer(int rank) const = 0;
  // The cluster's epoch, bumped by every rollback: an answer to a request
  // of an earlier epoch is stale.
  virtual uint64_t epoch() const = 0;
  // Whether the job is ending (every node told to stop).
  virtual bool finishing() const = 0;

 protected:
  ~ClusterLink() = default;
};

// The coordinator's reply carrying `body`.
template <typename Body>
Message CoordinatorReply(const Body& body) {
  proto::Header h;
  h.type = proto::MsgType::kReply;
  h.sender_role = proto::Role::kCoordinator;
  return proto::Encode(h, body);
}

// "server 2", "worker 0": a member as messages name it.
inline std::string MemberName(proto::Role role, int32_t rank) {
  return absl::StrCat(proto::RoleName(role), " ", rank);
}

// The coordinator's error reply.
inline Message CoordinatorError(const absl::Status& status) {
  return proto::EncodeError(proto::Role::kCoordinator, 0, status);
}

}  // namespace pstrain::server
