// The coordinator's part of recovering from a server failure.
//
// With checkpoints on, a failed server does not end the job. The coordinator
// bumps the cluster's epoch and sends kRecover to every live node: servers
// drop their tables and fail their waiting pulls, workers stop talking to
// servers. When a replacement registers with the failed server's rank (or
// the same process is heard from again, e.g. after SIGSTOP/SIGCONT), every
// server is given the tables again, restored from the latest checkpoint, so
// the model is one consistent cut; the workers, waiting in kWaitRecovery,
// get the new layout (epoch, restored step, data positions) and the new
// server addresses, and resume from the checkpoint. Pulls and pushes carry
// the epoch, so a request sent before the rollback never touches the
// restored tables. At most the steps since the last checkpoint are redone.
// In allreduce mode the workers' dense replicas roll back too: each worker
// drops its collective group on the failure, rebuilds it under the new
// epoch and restores its replica from the same checkpoint
// (worker/replica_group.h). In pipeline mode every stage leaves its step
// (its waits on its neighbours fail on kRecover), rebuilds its stage links
// and tensor-parallel group under the new epoch and resumes from the same
// checkpoint (worker/pipeline/pipeline_worker.cc).
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::MsgType;
using proto::Role;

bool Coordinator::CanRecover() const {
  return options_.recover_servers && checkpoints_->enabled() && !defined_tables_.empty() &&
         !finishing_;
}

void Coordinator::SendRecover(Member* m) {
  proto::Header h;
  h.type = MsgType::kRecover;
  h.sender_role = Role::kCoordinator;
  const Role role = m->info.role;
  const int32_t rank = m->info.rank;
  const uint64_t epoch = epoch_;
  node_->Call(m->peer, proto::Encode(h, proto::RecoverNotice{epoch_, recovery_reason_}),
              absl::Now() + absl::Seconds(10))
      .OnDone([this, role, rank, epoch](const absl::StatusOr<Message>& reply) {
        absl::Status st = proto::DecodeReply(reply, "recover").status();
        if (epoch != epoch_ || finishing_) return;
        std::string who = absl::StrCat(proto::RoleName(role), " ", rank);
        if (st.ok()) {
          if (role == Role::kServer) MaybeFinishRecovery();
          return;
        }
        if (role == Role::kWorker && st.code() != absl::StatusCode::kDeadlineExceeded &&
            st.code() != absl::StatusCode::kUnavailable) {
          // It cannot roll back (a worker of a build without recovery).
          Finish(absl::FailedPreconditionError(
              absl::StrCat(recovery_reason_, "; ", who, " cannot recover: ", st.message())));
          return;
        }
        spdlog::warn("recover: {} did not confirm: {}", who, st.ToString());
      });
}

void Coordinator::StartRecovery(Member* dead, const std::string& reason) {
  for (const auto& w : workers_) {
    if (w && w->done) {
      Finish(absl::UnavailableError(absl::StrCat(
          reason, "; worker ", w->info.rank,
          " has already left the job, so the cluster cannot roll back to a checkpoint")));
      return;
    }
  }
  dead->alive = false;
  ++epoch_;
  recovery_reason_ = reason;
  if (!recovering_) recovery_started_ = absl::Now();
  recovering_ = true;
  restoring_ = false;
  spdlog::warn("{}: the cluster rolls back to the latest checkpoint (epoch {}) once it is back; "
               "waiting up to {} for it", reason, epoch_,
               absl::FormatDuration(options_.recovery_timeout));
  // A checkpoint in progress is abandoned; workers paused for it resume
  // through the recovery.
  checkpoints_->Abandon();
  store_.AbortBarriers();
  layout_.reset();
  for (auto* slots : {&servers_, &workers_}) {
    for (auto& m : *slots) {
      if (m && m->alive && !m->done) SendRecover(&*m);
    }
  }
}

void Coordinator::MaybeFinishRecovery() {
  if (!recovering_ || restoring_ || finishing_) return;
  for (const auto& s : servers_) {
    if (!s || !s->alive) return;
  }
  auto layout = JobLayout(defined_tables_);
  if (!layout.ok()) return Finish(layout.status());
  if (absl::Status st = checkpoints_->RollBack(&*layout); !st.ok()) {
    return Finish(absl::Status(st.code(), absl::StrCat(recovery_reason_, "; ", st.message())));
  }
  restoring_ = true;
  layout_ = std::move(*layout);
  const std::string from = checkpoints_->restore_path();
  spdlog::info("every server is up: restoring {} on all {} servers (epoch {})",
               from.empty() ? std::string("the initial tables") : from, options_.num_servers,
               epoch_);
  CreateTablesOnServers([this](absl::Status st) {
    restoring_ = false;
    if (!st.ok()) return Finish(st);
    recovering_ = false;
    spdlog::info("recovered in {:.1f}s: workers resume from step {} (epoch {})",
                 absl::ToDoubleSeconds(absl::Now() - recovery_started_),
                 std::max<int64_t>(0, layout_->restored_step), epoch_);
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kCoordinator;
    proto::Recovered r{epoch_, View(-1), *layout_};
    for (const RecoveryWaiter& w : recovery_waiters_) node_->Reply(w.route, w.id, proto::Encode(h, r));
    recovery_waiters_.clear();
  });
}

void Coordinator::OnWaitRecovery(const proto::Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kWorker || FindMember(Role::kWorker, d.header().sender_rank) == nullptr) {
    return ReplyError(req, absl::InvalidArgumentError("only workers wait for a recovery"));
  }
  auto body = d.body<proto::WaitRecoveryRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (!recovering_ && epoch_ > body->epoch && layout_) {
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kCoordinator;
    node_->Reply(req, proto::Encode(h, proto::Recovered{epoch_, View(-1), *layout_}));
    return;
  }
  absl::Duration wait = absl::Milliseconds(std::clamp<int64_t>(body->wait_ms, 0, 600000));
  recovery_waiters_.push_back({req.route, req.id, body->epoch, absl::Now() + wait});
  ExpireRecoveryWaiters(absl::Now());
}

void Coordinator::ExpireRecoveryWaiters(absl::Time now) {
  if (recovering_) return;  // all wait for its end (bounded by recovery_timeout)
  for (auto it = recovery_waiters_.begin(); it != recovery_waiters_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    node_->Reply(it->route, it->id,
                 proto::EncodeError(Role::kCoordinator, 0,
                                    absl::UnavailableError("no recovery under way")));
    it = recovery_waiters_.erase(it);
  }
}

}  // namespace pstrain::server
