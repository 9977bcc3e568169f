// The coordinator core's registration: the rank a node gets (the one it
// asks for, its identity's, a free one, a failed server's), a worker coming
// back (elastic), a server replaced, a node that lost its coordinator
// registering again, and the cluster view once everyone has joined.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "cluster/coordinator_client.h"
#include "cluster/node_info.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::Decoded;
using proto::Role;

absl::StatusOr<int32_t> Coordinator::ChooseRank(const proto::NodeInfo& info,
                                                int32_t requested) const {
  const auto& slots = info.role == Role::kServer ? servers_ : workers_;
  int32_t rank = requested;
  if (rank >= static_cast<int32_t>(slots.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " requested but the job has ",
                                                   slots.size(), " ", proto::RoleName(info.role),
                                                   "s"));
  }
  const bool identified = info.role == Role::kWorker && !info.node_id.empty();
  if (rank < 0 && identified) {
    // A worker identity seen before gets its rank back.
    rank = IdentityRank(info.node_id);
  }
  if (rank < 0) {
    // A retry of a registration whose reply was lost keeps its rank (a
    // new identity is a new worker, whatever process it is in).
    for (size_t i = 0; i < slots.size() && rank < 0 && !identified; ++i) {
      if (slots[i] && slots[i]->info.incarnation == info.incarnation) rank = static_cast<int32_t>(i);
    }
    // A free rank; for a new identity, one that no other identity holds;
    // while a job is taken back, one that no known node will claim again
    // first (a node that had not joined yet), then any.
    const auto& expected = info.role == Role::kServer ? expected_servers_ : expected_workers_;
    for (int pass = resuming_ ? 0 : 1; pass < 2 && rank < 0; ++pass) {
      for (size_t i = 0; i < slots.size() && rank < 0; ++i) {
        bool reserved = pass == 0 && i < expected.size() && expected[i].has_value();
        for (const auto& [id, r] : identities_) reserved = reserved || r == static_cast<int32_t>(i);
        if (!slots[i] && !reserved) rank = static_cast<int32_t>(i);
      }
    }
    // A replacement for a failed server takes its rank.
    for (size_t i = 0;
         i < slots.size() && rank < 0 && recovery_->active() && info.role == Role::kServer; ++i) {
      if (!slots[i]->alive) rank = static_cast<int32_t>(i);
    }
    if (rank < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", slots.size(), " ", proto::RoleName(info.role), " slots are taken"));
    }
  }
  return rank;
}

void Coordinator::OnRegister(const Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::RegisterRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  proto::NodeInfo info = body->node;
  if (info.role != Role::kServer && info.role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("only servers and workers register"));
  }
  if (resuming_) return OnResumeRegister(info, req);
  if (info.resume) {
    // A node that lost its coordinator registers again with its rank.
    const auto& known = info.role == Role::kServer ? servers_ : workers_;
    const bool same = info.rank >= 0 && info.rank < static_cast<int32_t>(known.size()) &&
                      known[info.rank] && known[info.rank]->info.incarnation == info.incarnation;
    if (!same) {
      const std::string who = MemberName(info.role, info.rank);
      return ReplyError(
          req, absl::FailedPreconditionError(
                   journal_ == nullptr
                       ? absl::StrCat("the coordinator at ", endpoint_, " keeps no journal (no "
                                      "--checkpoint_dir) and does not know ", who,
                                      ": the job cannot be resumed")
                       : absl::StrCat("the coordinator at ", endpoint_, " does not know ", who,
                                      " (it started the job over): its state is of another run")));
    }
  }
  absl::StatusOr<int32_t> chosen = ChooseRank(info, body->requested_rank);
  if (!chosen.ok()) return ReplyError(req, chosen.status());
  const int32_t rank = *chosen;
  auto& slots = info.role == Role::kServer ? servers_ : workers_;
  const bool is_worker = info.role == Role::kWorker;
  bool replacement = false;
  if (is_worker && slots[rank] && options_.elastic_workers && !finishing_ &&
      !slots[rank]->done &&
      (elastic_->dropped(rank) || slots[rank]->info.incarnation != info.incarnation)) {
    // A worker coming back (elastic_workers.h).
    Member& old = *slots[rank];
    if (!elastic_->dropped(rank)) {
      // Its old process is gone: killed and restarted faster than
      // --worker_timeout could tell. Drop that one first.
      old.alive = false;
      monitor()->OnDead(Role::kWorker, rank);
      DropWorker(&old, absl::StrCat(MemberName(info.role, rank), " (", old.info.endpoint, ", pid ",
                                    old.info.pid, ") was replaced by a new process"));
      if (finishing_ || !elastic_->dropped(rank)) {
        // Dropping it ended the job (it could not go on without it).
        return ReplyError(req, absl::AbortedError("the job is ending"));
      }
    }
    if (rank == 0) {
      // The lead's role has moved on and is never handed back
      // (docs/checkpoints-and-recovery.md, "Worker failure"); its shard is adopted like any other.
      return ReplyError(req, NothingLeftToDo(
                                 "worker 0 was dropped and the lead role handed on; a new worker 0 "
                                 "process is not re-admitted: the job goes on without it, and "
                                 "another worker trains the rest of its shard"));
    }
    AdmitReturningWorker(&old, info);
    node_->Reply(req, CoordinatorReply(View(rank)));
    return;
  }
  if (is_worker && slots[rank] && elastic_->dropped(rank)) {
    return ReplyError(req, NothingLeftToDo(absl::StrCat(
                               MemberName(info.role, rank),
                               " was dropped from this job and the job is ending (or it has "
                               "finished): it is not re-admitted; nothing left for this process "
                               "to do")));
  }
  if (slots[rank] && slots[rank]->info.incarnation != info.incarnation) {
    const bool recovers = info.role == Role::kServer || options_.recover_workers;
    if (!recovers || !CanRecover()) {
      return ReplyError(req, absl::AlreadyExistsError(absl::StrCat(
                                 MemberName(info.role, rank), " is already registered from ",
                                 slots[rank]->info.endpoint)));
    }
    // A new process for this server's (or, recover_workers, worker's) rank:
    // the old one is gone (killed and restarted faster than the heartbeat
    // timeout could tell).
    if (slots[rank]->alive) {
      StartRecovery(&*slots[rank], absl::StrCat(MemberName(info.role, rank), " (",
                                                slots[rank]->info.endpoint, ", pid ",
                                                slots[rank]->info.pid,
                                                ") was replaced by a new process"));
      if (finishing_) return ReplyError(req, absl::AbortedError("the job is ending"));
    }
    node_->Disconnect(slots[rank]->peer);
    slots[rank].reset();
    replacement = true;
  }
  bool is_new = !slots[rank].has_value();
  info.rank = rank;
  if (is_new) {
    Member m;
    m.info = info;
    m.peer = node_->Connect(info.endpoint);
    m.last_seen = absl::Now();
    slots[rank] = std::move(m);
    JournalMemberOf(*slots[rank]);
    if (info.role == Role::kWorker && !info.node_id.empty()) identities_[info.node_id] = rank;
    monitor()->OnJoin(info);
    spdlog::info("{} {} from {} (host {}, pid {}{})", MemberName(info.role, rank),
                 replacement ? "rejoined (a replacement)" : "joined", info.endpoint, info.host,
                 info.pid, info.node_id.empty() ? "" : ", node " + info.node_id);
  }
  node_->Reply(req, CoordinatorReply(View(rank)));
  if (replacement) {
    MaybeFinishRecovery();
  } else if (is_new && AllJoined()) {
    spdlog::info("all {} servers and {} workers joined", options_.num_servers, options_.num_workers);
    ReplyCluster();
  }
}

void Coordinator::ReplyCluster() {
  for (const Parked& p : cluster_waiters_) node_->Reply(p.route, p.id, CoordinatorReply(View(-1)));
  cluster_waiters_.clear();
}

void Coordinator::OnGetCluster(const Decoded& d, const RpcRequest& req) {
  if (AllJoined()) {
    node_->Reply(req, CoordinatorReply(View(d.header().sender_rank)));
    return;
  }
  cluster_waiters_.push_back({req.route, req.id});
}

}  // namespace pstrain::server
