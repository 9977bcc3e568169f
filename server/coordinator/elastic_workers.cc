#include "server/coordinator/elastic_workers.h"

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace pstrain::server {

using proto::MsgType;
using proto::Role;

namespace {
// Retiring a worker is bookkeeping on each server; one that does not answer
// within this is dead or frozen, which its heartbeats tell.
constexpr absl::Duration kRetireTimeout = absl::Seconds(30);
// Each phase of a re-admission is one round trip to every server; a server
// slower than this cancels it (the worker is dropped again).
constexpr absl::Duration kReadmitTimeout = absl::Seconds(10);
}  // namespace

ElasticWorkers::ElasticWorkers(bool enabled, int num_workers, ClusterLink* link,
                               RendezvousStore* store)
    : num_workers_(num_workers), link_(link), store_(store), workers_(num_workers) {
  // Who gathers the evaluation and writes the summary. Its absence tells
  // workers the job is not elastic.
  if (enabled) store_->Set("lead", Buffer::FromString("0"));
}

void ElasticWorkers::OnHeartbeat(int32_t rank, const proto::Heartbeat& hb) {
  Worker& w = workers_[rank];
  // A re-admitted worker reports no position before its first step.
  const bool behind = w.resuming && std::make_pair(hb.data_epoch, hb.data_rows) <
                                        std::make_pair(w.data_epoch, w.data_rows);
  if (!behind) {
    w.data_epoch = hb.data_epoch;
    w.data_rows = hb.data_rows;
    w.resuming = false;
  }
  w.samples = w.samples_before + hb.samples;
}

int32_t ElasticWorkers::NextLead(int32_t rank, const std::function<bool(int32_t)>& in_job) const {
  for (int32_t w = 0; w < num_workers_ && lead_can_move_; ++w) {
    if (w != rank && in_job(w) && !workers_[w].dropped) return w;
  }
  return -1;
}

absl::Status ElasticWorkers::Drop(int32_t rank, const std::string& reason,
                                  const std::function<bool(int32_t)>& in_job) {
  const int32_t next_lead = rank == lead_ ? NextLead(rank, in_job) : lead_;
  if (next_lead < 0) {
    return absl::UnavailableError(absl::StrCat(
        reason, "; worker ", rank, " is the lead worker (it gathers the evaluation and writes the "
        "summary) and ",
        lead_can_move_ ? "no worker is left in the job to take that over"
                       : "this job cannot hand that role on (pipeline mode, or no worker had "
                         "started training)",
        ", so the job cannot go on without it"));
  }
  Worker& w = workers_[rank];
  w.dropped = true;
  w.resuming = false;
  w.rejoin.reset();
  ++num_dropped_;
  orphans_.push_back(Orphan{rank, w.data_epoch, w.data_rows, w.samples, -1});
  spdlog::warn("{}: dropped from the job (elastic); its shard goes on from epoch {} row {} on the "
               "first worker to finish its own; {} workers left",
               reason, w.data_epoch, w.data_rows, num_workers_ - num_dropped_);
  store_->Set(absl::StrCat("dead/", rank), Buffer::FromString(std::to_string(w.samples)));
  if (next_lead != lead_) {
    lead_ = next_lead;
    store_->Set("lead", Buffer::FromString(std::to_string(lead_)));
    spdlog::warn("worker {} is the lead worker now, in place of worker {}: it gathers the evaluation "
                 "(an evaluation round in flight is gathered without worker {}'s part), writes the "
                 "summary and saves the model",
                 lead_, rank, rank);
  }
  store_->ShrinkBarriers(num_workers_ - num_dropped_ + 1, num_workers_ - num_dropped_);
  RetireOnServers(rank);
  return absl::OkStatus();
}

void ElasticWorkers::DroppedPosition(int32_t rank, int32_t* epoch, int64_t* rows,
                                     uint64_t* samples) const {
  const Worker& w = workers_[rank];
  *epoch = w.data_epoch;
  *rows = w.data_rows;
  *samples = w.samples;
}

void ElasticWorkers::RestoreDropped(int32_t rank, int32_t epoch, int64_t rows, uint64_t samples,
                                    int32_t adopter) {
  Worker& w = workers_[rank];
  if (w.dropped) return;
  w.dropped = true;
  w.data_epoch = epoch;
  w.data_rows = rows;
  w.samples = samples;
  ++num_dropped_;
  orphans_.push_back(Orphan{rank, epoch, rows, samples, adopter});
}

void ElasticWorkers::RetireOnServers(int32_t rank) {
  proto::Header h;
  h.type = MsgType::kRetireWorker;
  h.sender_role = Role::kCoordinator;
  for (int s = 0; s < link_->num_servers(); ++s) {
    const PeerId peer = link_->server_peer(s);
    if (peer == kNoPeer) continue;
    link_->node()
        .Call(peer, proto::Encode(h, proto::RetireWorker{rank}), absl::Now() + kRetireTimeout)
        .OnDone([s, rank](const absl::StatusOr<Message>& reply) {
          absl::Status st = proto::DecodeReply(reply, "retire").status();
          if (!st.ok()) spdlog::warn("server {} did not retire worker {}: {}", s, rank, st.ToString());
        });
  }
}

proto::ShardClaim ElasticWorkers::Claim(int32_t adopter) {
  for (Orphan& o : orphans_) {
    if (o.adopter >= 0) continue;
    o.adopter = adopter;
    store_->Set(absl::StrCat("adopted/", o.rank), Buffer::FromString(std::to_string(o.adopter)));
    spdlog::info("worker {} adopts the rest of worker {}'s shard (epoch {}, from row {})",
                 o.adopter, o.rank, o.epoch, o.rows);
    return proto::ShardClaim{o.rank, o.epoch, o.rows, o.samples};
  }
  return proto::ShardClaim{};
}

void ElasticWorkers::Readmit(int32_t rank, const proto::NodeInfo& info) {
  Worker& w = workers_[rank];
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
    const int before = num_workers_ - num_dropped_;
    w.dropped = false;
    --num_dropped_;
    // Until its first step it reports position zero: keep the one it
    // resumes from, in case it dies again before that.
    w.data_epoch = j.position.epoch;
    w.data_rows = j.position.rows;
    w.samples = w.samples_before = j.samples;
    w.resuming = true;
    store_->Erase(absl::StrCat("dead/", rank));
    store_->GrowBarriers(before, before + 1);
    spdlog::info("worker {} is back ({}, pid {}): its shard was not adopted, so it resumes it at "
                 "epoch {} row {} once the servers take it back; {} workers in the job",
                 rank, info.endpoint, info.pid, j.position.epoch, j.position.rows,
                 num_workers_ - num_dropped_);
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
  w.rejoin = j;
}

bool ElasticWorkers::ResumesShard(int32_t rank) const {
  const std::optional<proto::Rejoin>& j = workers_[rank].rejoin;
  return j && j->state == proto::RejoinState::kResume;
}

proto::Rejoin ElasticWorkers::TakeRejoin(int32_t rank) {
  proto::Rejoin j = workers_[rank].rejoin.value_or(proto::Rejoin{});
  workers_[rank].rejoin.reset();
  return j;
}

void ElasticWorkers::ReadmitOnServers(int32_t rank,
                                      std::function<void(absl::StatusOr<int64_t>)> done) {
  struct Round {
    int remaining = 0;
    int64_t step = -1;
    absl::Status failure;
  };
  const uint64_t epoch = link_->epoch();
  const int num_servers = link_->num_servers();
  proto::Header h;
  h.type = MsgType::kReadmitWorker;
  h.sender_role = Role::kCoordinator;
  // Phase 2: commit at the largest proposal everywhere (or cancel with -1).
  auto commit = [this, rank, epoch, h, done, num_servers](int64_t step, absl::Status why) {
    auto round = std::make_shared<Round>();
    round->remaining = num_servers;
    round->step = step;
    round->failure = why;
    for (int s = 0; s < num_servers; ++s) {
      link_->node()
          .Call(link_->server_peer(s),
                proto::Encode(h, proto::ReadmitWorker{rank, proto::ReadmitPhase::kCommit, step}),
                absl::Now() + kReadmitTimeout)
          .OnDone([this, s, rank, epoch, round, done](const absl::StatusOr<Message>& reply) {
            absl::Status st = proto::DecodeReply(
                reply, absl::StrCat("re-admit worker ", rank, " on server ", s)).status();
            if (!st.ok() && round->failure.ok()) round->failure = st;
            if (--round->remaining > 0) return;
            if (round->failure.ok() && epoch != link_->epoch()) {
              round->failure = absl::AbortedError("the cluster rolled back meanwhile");
            }
            if (!round->failure.ok()) return done(round->failure);
            done(round->step);
          });
    }
  };
  // Phase 1: every server holds its next step and proposes it.
  auto round = std::make_shared<Round>();
  round->remaining = num_servers;
  for (int s = 0; s < num_servers; ++s) {
    link_->node()
        .Call(link_->server_peer(s),
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
          if (round->failure.ok() && epoch != link_->epoch()) {
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
