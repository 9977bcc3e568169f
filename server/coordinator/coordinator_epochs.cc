// The coordinator core's epochs: the job's tables (the layout of epoch 0,
// created on every server) and the rollback to a new epoch when a server
// fails (ServerRecovery keeps the state between the steps; see
// server_recovery.h for the protocol).
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/table_layout.h"

namespace pstrain::server {

using proto::Decoded;
using proto::MsgType;
using proto::Role;

namespace {
// Creating a job's tables allocates and initializes them: seconds for big
// dense tables. Reading a checkpoint's shards takes as long as they are big
// (a minute for 16 M rows of dim 64); servers heartbeat meanwhile, so a dead
// one is found by its heartbeats, not by this deadline.
constexpr absl::Duration kCreateTablesTimeout = absl::Seconds(60);
constexpr absl::Duration kRestoreTablesTimeout = absl::Hours(1);
// A node answers kRecover once it dropped its state; one that has not
// within this is frozen or gone, which its heartbeats tell.
constexpr absl::Duration kRecoverTimeout = absl::Seconds(10);
}  // namespace

void Coordinator::OnDefineTables(const Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::DefineTablesRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (!defined_tables_.empty() && !SameTables(defined_tables_, body->tables)) {
    return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                               MemberName(d.header().sender_role, d.header().sender_rank),
                               " defines tables that differ from the job's (same model flags on "
                               "every worker?)")));
  }
  if (recovery_->active()) {
    if (options_.recover_workers && !defined_tables_.empty()) {
      // A replacement worker: it starts from the layout the recovery
      // restores (the checkpoint's step and data positions).
      recovery_layout_waiters_.push_back({req.route, req.id});
      return;
    }
    return ReplyError(req, absl::UnavailableError("the cluster is recovering from a failure"));
  }
  if (layout_) {
    node_->Reply(req, CoordinatorReply(*layout_));
    return;
  }
  if (creating_tables_) {
    layout_waiters_.push_back({req.route, req.id});
    return;
  }
  if (!AllJoined()) {
    return ReplyError(req, absl::FailedPreconditionError("tables defined before all nodes joined"));
  }
  auto layout = JobLayout(body->tables);
  if (!layout.ok()) return ReplyError(req, layout.status());
  if (absl::Status st = checkpoints_->CheckTables(body->tables); !st.ok()) {
    return ReplyError(req, st);
  }
  layout_waiters_.push_back({req.route, req.id});
  checkpoints_->StartJob(body->tables, &*layout);
  defined_tables_ = body->tables;
  creating_tables_ = true;
  layout_ = std::move(*layout);
  CreateTablesOnServers([this](absl::Status st) {
    for (const Parked& p : layout_waiters_) {
      node_->Reply(p.route, p.id, st.ok() ? CoordinatorReply(*layout_) : CoordinatorError(st));
    }
    layout_waiters_.clear();
    creating_tables_ = false;
    if (!st.ok()) Finish(st);
  });
}

absl::StatusOr<proto::TableLayout> Coordinator::JobLayout(const std::vector<TableSpec>& tables) const {
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      ComputeLayout(tables, options_.num_servers, options_.dense_chunk_floats));
  layout.num_workers = options_.num_workers;
  layout.consistency = options_.consistency;
  layout.staleness = options_.staleness;
  layout.epoch = epoch_;
  return layout;
}

void Coordinator::CreateTablesOnServers(std::function<void(absl::Status)> done) {
  // layout_ is set but not published until every server confirms.
  proto::TableLayout layout = *layout_;
  layout_.reset();
  auto remaining = std::make_shared<int>(options_.num_servers);
  auto failure = std::make_shared<absl::Status>();
  proto::Header h;
  h.type = MsgType::kCreateTables;
  h.sender_role = Role::kCoordinator;
  const uint64_t epoch = epoch_;
  for (int s = 0; s < options_.num_servers; ++s) {
    proto::CreateTablesRequest req{s, layout, checkpoints_->restore_files()};
    RpcFuture f = node_->Call(servers_[s]->peer, proto::Encode(h, req),
                              absl::Now() + (req.restore_files.empty() ? kCreateTablesTimeout
                                                                       : kRestoreTablesTimeout));
    f.OnDone([this, s, remaining, failure, layout, done, epoch](const absl::StatusOr<Message>& reply) {
      absl::Status st = proto::DecodeReply(reply, absl::StrCat("create tables on server ", s)).status();
      if (!st.ok() && failure->ok()) *failure = st;
      if (--*remaining > 0) return;
      if (epoch != epoch_) return;  // a failure meanwhile: its recovery takes over
      if (failure->ok()) {
        layout_ = layout;
        Journal([this](CoordinatorJournal& j) { return j.SetTables(defined_tables_, &*layout_); });
        spdlog::info("{} tables created on {} servers", layout.tables.size(), options_.num_servers);
      } else {
        spdlog::error("{}", failure->ToString());
      }
      done(*failure);
    });
  }
}

void Coordinator::OnWaitRecovery(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kWorker ||
      FindMember(Role::kWorker, d.header().sender_rank) == nullptr) {
    return ReplyError(req, absl::InvalidArgumentError("only workers wait for a recovery"));
  }
  auto body = d.body<proto::WaitRecoveryRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (!recovery_->active() && epoch_ > body->epoch && layout_) {
    node_->Reply(req, CoordinatorReply(proto::Recovered{epoch_, View(-1), *layout_}));
    return;
  }
  recovery_->Park({req.route, req.id}, absl::Milliseconds(body->wait_ms));
}

bool Coordinator::CanRecover() const {
  return options_.recover_servers && checkpoints_->enabled() && !defined_tables_.empty() &&
         !finishing_;
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
  Journal([this](CoordinatorJournal& j) {
    PS_RETURN_IF_ERROR(j.SetEpoch(epoch_));
    return j.SetTables(defined_tables_, nullptr);  // until the servers restored it
  });
  recovery_->Begin(reason);
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

void Coordinator::SendRecover(Member* m) {
  proto::Header h;
  h.type = MsgType::kRecover;
  h.sender_role = Role::kCoordinator;
  const Role role = m->info.role;
  const int32_t rank = m->info.rank;
  const uint64_t epoch = epoch_;
  node_->Call(m->peer, proto::Encode(h, proto::RecoverNotice{epoch_, recovery_->reason()}),
              absl::Now() + kRecoverTimeout)
      .OnDone([this, role, rank, epoch](const absl::StatusOr<Message>& reply) {
        absl::Status st = proto::DecodeReply(reply, "recover").status();
        if (epoch != epoch_ || finishing_) return;
        std::string who = MemberName(role, rank);
        if (st.ok()) {
          if (role == Role::kServer) MaybeFinishRecovery();
          return;
        }
        if (role == Role::kWorker && st.code() != absl::StatusCode::kDeadlineExceeded &&
            st.code() != absl::StatusCode::kUnavailable) {
          // It cannot roll back (a worker of a build without recovery).
          Finish(absl::FailedPreconditionError(
              absl::StrCat(recovery_->reason(), "; ", who, " cannot recover: ", st.message())));
          return;
        }
        spdlog::warn("recover: {} did not confirm: {}", who, st.ToString());
      });
}

void Coordinator::MaybeFinishRecovery() {
  if (!recovery_->active() || recovery_->restoring() || finishing_) return;
  for (const auto& s : servers_) {
    if (!s || !s->alive) return;
  }
  if (options_.recover_workers) {
    // A failed worker's replacement takes part in the rollback too.
    for (const auto& w : workers_) {
      if (!w || !w->alive) return;
    }
  }
  auto layout = JobLayout(defined_tables_);
  if (!layout.ok()) return Finish(layout.status());
  if (absl::Status st = checkpoints_->RollBack(&*layout); !st.ok()) {
    return Finish(absl::Status(st.code(), absl::StrCat(recovery_->reason(), "; ", st.message())));
  }
  recovery_->StartRestore();
  layout_ = std::move(*layout);
  const std::string from = checkpoints_->restore_path();
  spdlog::info("every server is up: restoring {} on all {} servers (epoch {})",
               from.empty() ? std::string("the initial tables") : from, options_.num_servers,
               epoch_);
  CreateTablesOnServers([this](absl::Status st) {
    if (!st.ok()) {
      recovery_->RestoreFailed();
      return Finish(st);
    }
    recovery_->Restored(proto::Recovered{epoch_, View(-1), *layout_});
    for (const Parked& p : recovery_layout_waiters_) {
      node_->Reply(p.route, p.id, CoordinatorReply(*layout_));
    }
    recovery_layout_waiters_.clear();
  });
}

}  // namespace pstrain::server
