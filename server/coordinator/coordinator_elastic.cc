// The coordinator's part of elastic workers: dropping a dead worker, handing
// its data to another, and taking it back when it returns.
//
// Re-admission. A worker process that registers with the rank of a dropped
// worker (or of a live one: a killed worker restarted faster than
// --worker_timeout, whose old process is then dropped first) is the same
// worker coming back. What it trains depends on its shard:
//   - not adopted yet: the orphan is withdrawn and the worker resumes its
//     own shard from the position the coordinator recorded when it was
//     dropped (its last heartbeat: data epoch and rows whose gradients were
//     on the servers), as a restore from a checkpoint resumes. It is counted
//     in barriers again at once. When it asks (kRejoin, after its tables are
//     defined) the servers take it back in two phases (kReadmitWorker: each
//     holds its next step and proposes it; all commit the largest), so every
//     server waits for it from the same step C, one that none had passed;
//     it then trains from clock C.
//   - adopted: the adopter reads the rest of the shard, every epoch of it,
//     so nothing of it is left; the returning worker trains nothing (it
//     would train rows twice), says so and finishes. It stays out of the
//     barriers, and its evaluation share and sample count still come from
//     its adopter.
// Either way every row of the shard is trained once from the recorded
// position on. Checkpoints do not wait for a re-admitted worker (it counts
// as finished in them, like a dropped one): its rows after the return are
// not in a checkpoint's positions.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::MsgType;
using proto::Role;

namespace {
constexpr absl::Duration kRetireTimeout = absl::Seconds(30);
constexpr absl::Duration kReadmitTimeout = absl::Seconds(10);
}  // namespace

// Elastic workers. A dead worker is dropped: the servers retire it, so BSP
// steps and SSP bounds stop waiting for it; barriers shrink; its shard's
// remaining rows, from the position of its last heartbeat (rows whose
// gradients had reached the servers), go to the first worker that runs out
// of its own data (kClaimShard), so no row of the epoch is skipped. Rows it
// trained after that heartbeat are trained twice, never lost.
//
// The lead worker (worker 0 until it is dropped) gathers the evaluation,
// writes the summary and saves the model. When the lead is dropped, the
// lowest-ranked worker still in the job (not dropped, not finished) takes
// that over: store key "lead" names it, and workers read it at their
// evaluation rounds, their progress reports and the end of training
// (worker/trainer_lead.cc). The role is never handed back to a returning
// worker. Pipeline and allreduce modes cannot hand it on: the job ends.
void Coordinator::DropWorker(Member* m, const std::string& reason) {
  const int32_t rank = m->info.rank;
  if (m->dropped) {
    // A returning worker whose shard had been adopted died again: it had
    // nothing to train and nothing of it is waited for.
    spdlog::warn("{}; it was already out of the job", reason);
    return;
  }
  if (finishing_) return Finish(absl::UnavailableError(reason));
  for (const auto& t : defined_tables_) {
    if (t.on_workers) {
      return Finish(absl::UnavailableError(
          absl::StrCat(reason, "; allreduce mode cannot drop a worker from its collective group")));
    }
  }
  int32_t next_lead = lead_;
  if (rank == lead_) {
    next_lead = -1;
    for (size_t w = 0; w < workers_.size() && next_lead < 0 && lead_can_move_; ++w) {
      if (static_cast<int32_t>(w) != rank && workers_[w] && !workers_[w]->dropped && !workers_[w]->done) {
        next_lead = static_cast<int32_t>(w);
      }
    }
    if (next_lead < 0) {
      return Finish(absl::UnavailableError(absl::StrCat(
          reason, "; worker ", rank, " is the lead worker (it gathers the evaluation and writes the "
          "summary) and ",
          lead_can_move_ ? "no worker is left in the job to take that over"
                         : "this job cannot hand that role on (pipeline mode, or no worker had "
                           "started training)",
          ", so the job cannot go on without it")));
    }
  }
  m->dropped = true;
  m->resuming = false;
  m->rejoin.reset();
  ++dropped_workers_;
  orphans_.push_back(Orphan{rank, m->data_epoch, m->data_rows, m->samples, -1});
  spdlog::warn("{}: dropped from the job (elastic); its shard goes on from epoch {} row {} on the "
               "first worker to finish its own; {} workers left",
               reason, m->data_epoch, m->data_rows, options_.num_workers - dropped_workers_);
  store_.Set(absl::StrCat("dead/", rank), Buffer::FromString(std::to_string(m->samples)));
  if (next_lead != lead_) {
    lead_ = next_lead;
    store_.Set("lead", Buffer::FromString(std::to_string(lead_)));
    spdlog::warn("worker {} is the lead worker now, in place of worker {}: it gathers the evaluation "
                 "(an evaluation round in flight is gathered without worker {}'s part), writes the "
                 "summary and saves the model",
                 lead_, rank, rank);
  }
  store_.ShrinkBarriers(options_.num_workers - dropped_workers_ + 1,
                        options_.num_workers - dropped_workers_);
  proto::Header h;
  h.type = MsgType::kRetireWorker;
  h.sender_role = Role::kCoordinator;
  for (int s = 0; s < options_.num_servers; ++s) {
    if (!servers_[s]) continue;
    node_->Call(servers_[s]->peer, proto::Encode(h, proto::RetireWorker{rank}),
                absl::Now() + kRetireTimeout)
        .OnDone([s, rank](const absl::StatusOr<Message>& reply) {
          absl::Status st = proto::DecodeReply(reply, "retire").status();
          if (!st.ok()) spdlog::warn("server {} did not retire worker {}: {}", s, rank, st.ToString());
        });
  }
  // Checkpoints no longer wait for it.
  checkpoints_->OnWorkerLeft(rank);
  MaybeEndJob();
}

void Coordinator::OnClaimShard(const proto::Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker || m->dropped) {
    return ReplyError(req, absl::InvalidArgumentError("only live workers adopt shards"));
  }
  proto::ShardClaim claim;
  for (Orphan& o : orphans_) {
    if (o.adopter >= 0) continue;
    o.adopter = m->info.rank;
    claim = proto::ShardClaim{o.rank, o.epoch, o.rows, o.samples};
    store_.Set(absl::StrCat("adopted/", o.rank), Buffer::FromString(std::to_string(o.adopter)));
    spdlog::info("worker {} adopts the rest of worker {}'s shard (epoch {}, from row {})",
                 o.adopter, o.rank, o.epoch, o.rows);
    break;
  }
  proto::Header h;
  h.type = MsgType::kReply;
  h.sender_role = Role::kCoordinator;
  node_->Reply(req, proto::Encode(h, claim));
}

void Coordinator::AdmitReturningWorker(Member* m, const proto::NodeInfo& info) {
  const int32_t rank = m->info.rank;
  node_->Disconnect(m->peer);
  m->info = info;
  m->info.rank = rank;
  m->peer = node_->Connect(info.endpoint);
  m->last_seen = absl::Now();
  m->alive = true;
  monitor()->OnJoin(m->info);
  proto::Rejoin j;
  j.position.rank = rank;
  auto orphan = std::find_if(orphans_.begin(), orphans_.end(),
                             [rank](const Orphan& o) { return o.rank == rank; });
  if (orphan != orphans_.end() && orphan->adopter < 0) {
    j.state = proto::RejoinState::kResume;
    j.position.epoch = orphan->epoch;
    j.position.rows = orphan->rows;
    j.samples = orphan->samples;
    orphans_.erase(orphan);
    const int before = options_.num_workers - dropped_workers_;
    m->dropped = false;
    --dropped_workers_;
    // Until its first step it reports position zero: keep the one it
    // resumes from, in case it dies again before that.
    m->data_epoch = j.position.epoch;
    m->data_rows = j.position.rows;
    m->samples = m->samples_before = j.samples;
    m->resuming = true;
    store_.Erase(absl::StrCat("dead/", rank));
    store_.GrowBarriers(before, before + 1);
    spdlog::info("worker {} is back ({}, pid {}): its shard was not adopted, so it resumes it at "
                 "epoch {} row {} once the servers take it back; {} workers in the job",
                 rank, info.endpoint, info.pid, j.position.epoch, j.position.rows,
                 options_.num_workers - dropped_workers_);
  } else {
    // Still dropped (barriers, the end of the job and the summary count it
    // out); it finishes once told.
    j.state = proto::RejoinState::kAdopted;
    if (orphan != orphans_.end()) {
      j.adopter = orphan->adopter;
      j.position.epoch = orphan->epoch;
      j.position.rows = orphan->rows;
      j.samples = orphan->samples;
    }
    spdlog::warn("worker {} is back ({}, pid {}) but worker {} adopted its shard (from epoch {} row "
                 "{}) and trains the rest of it: nothing is left for worker {}, which finishes "
                 "without training",
                 rank, info.endpoint, info.pid, j.adopter, j.position.epoch, j.position.rows, rank);
  }
  m->rejoin = j;
}

void Coordinator::OnRejoin(const proto::Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("only registered workers rejoin"));
  }
  // Only parameter-server-mode workers ask: they can take the lead over.
  lead_can_move_ = true;
  proto::Header h;
  h.type = MsgType::kReply;
  h.sender_role = Role::kCoordinator;
  if (!m->rejoin || m->rejoin->state != proto::RejoinState::kResume) {
    // A worker starting for the first time (kNew), or one with nothing left.
    proto::Rejoin j = m->rejoin.value_or(proto::Rejoin{});
    m->rejoin.reset();
    node_->Reply(req, proto::Encode(h, j));
    return;
  }
  if (recovering_ || finishing_) {
    return ReplyError(req, absl::UnavailableError("the cluster is recovering or ending"));
  }
  proto::Rejoin j = *m->rejoin;
  m->rejoin.reset();
  const int32_t rank = m->info.rank;
  const uint64_t incarnation = m->info.incarnation;
  std::string route = req.route;
  uint64_t id = req.id;
  ReadmitOnServers(rank, [this, rank, incarnation, route, id, j](absl::StatusOr<int64_t> step) mutable {
    Member* w = FindMember(Role::kWorker, rank);
    absl::Status st = step.status();
    if (st.ok() && (w == nullptr || w->info.incarnation != incarnation || w->dropped || finishing_)) {
      st = absl::AbortedError("the worker was dropped again, or the job is ending");
    }
    if (!st.ok()) {
      node_->Reply(route, id, proto::EncodeError(Role::kCoordinator, 0, st));
      if (w != nullptr && w->info.incarnation == incarnation && !w->dropped && !finishing_) {
        // Its shard goes back to the orphans, from where it would resume.
        w->alive = false;
        DropWorker(w, absl::StrCat("worker ", rank, " could not be re-admitted (", st.message(), ")"));
      }
      return;
    }
    j.step = *step;
    j.position.clock = *step;
    spdlog::info("worker {} re-admitted at step {}, resuming its shard at epoch {} row {} ({} samples "
                 "trained before it was dropped)",
                 rank, j.step, j.position.epoch, j.position.rows, j.samples);
    proto::Header rh;
    rh.type = MsgType::kReply;
    rh.sender_role = Role::kCoordinator;
    node_->Reply(route, id, proto::Encode(rh, j));
  });
}

void Coordinator::ReadmitOnServers(int32_t rank, std::function<void(absl::StatusOr<int64_t>)> done) {
  struct Round {
    int remaining = 0;
    int64_t step = -1;
    absl::Status failure;
  };
  const uint64_t epoch = epoch_;
  proto::Header h;
  h.type = MsgType::kReadmitWorker;
  h.sender_role = Role::kCoordinator;
  // Phase 2: commit at the largest proposal everywhere (or cancel with -1).
  auto commit = [this, rank, epoch, h, done](int64_t step, absl::Status why) {
    auto round = std::make_shared<Round>();
    round->remaining = options_.num_servers;
    round->step = step;
    round->failure = why;
    for (int s = 0; s < options_.num_servers; ++s) {
      node_->Call(servers_[s]->peer,
                  proto::Encode(h, proto::ReadmitWorker{rank, proto::ReadmitPhase::kCommit, step}),
                  absl::Now() + kReadmitTimeout)
          .OnDone([this, s, rank, epoch, round, done](const absl::StatusOr<Message>& reply) {
            absl::Status st = proto::DecodeReply(
                reply, absl::StrCat("re-admit worker ", rank, " on server ", s)).status();
            if (!st.ok() && round->failure.ok()) round->failure = st;
            if (--round->remaining > 0) return;
            if (round->failure.ok() && epoch != epoch_) {
              round->failure = absl::AbortedError("the cluster rolled back meanwhile");
            }
            if (!round->failure.ok()) return done(round->failure);
            done(round->step);
          });
    }
  };
  // Phase 1: every server holds its next step and proposes it.
  auto round = std::make_shared<Round>();
  round->remaining = options_.num_servers;
  for (int s = 0; s < options_.num_servers; ++s) {
    node_->Call(servers_[s]->peer,
                proto::Encode(h, proto::ReadmitWorker{rank, proto::ReadmitPhase::kPrepare, -1}),
                absl::Now() + kReadmitTimeout)
        .OnDone([this, s, rank, epoch, round, commit](const absl::StatusOr<Message>& reply) {
          auto d = proto::DecodeReply(reply, absl::StrCat("prepare re-admitting worker ", rank,
                                                          " on server ", s));
          absl::Status st = d.status();
          if (st.ok()) {
            auto body = d->body<proto::ReadmitWorker>();
            if (body.ok()) {
              round->step = std::max(round->step, body->step);
            } else {
              st = body.status();
            }
          }
          if (!st.ok() && round->failure.ok()) round->failure = st;
          if (--round->remaining > 0) return;
          if (round->failure.ok() && epoch != epoch_) {
            round->failure = absl::AbortedError("the cluster rolled back meanwhile");
          }
          if (round->failure.ok() && round->step < 0) {
            round->failure = absl::InternalError("no server proposed a step");
          }
          commit(round->failure.ok() ? round->step : -1, round->failure);
        });
  }
}

}  // namespace pstrain::server
