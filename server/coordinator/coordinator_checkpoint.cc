// The coordinator's part of checkpoints: the schedule, the workers' pause,
// the servers' shards, the manifest, and restoring a job from one.
//
// Workers pause at the same step (the schedule is in the table layout and in
// each checkpoint's reply, so no worker can miss it): each waits for its last
// push, then reports its position (clock, data epoch and rows) and waits.
// Finished workers report once and count as paused from then on. When every
// worker is paused no gradient is in flight, so the servers' shards form a
// consistent cut; the manifest then records the positions and LATEST moves.
#include <cmath>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/shard_file.h"
#include "common/file_util.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::Decoded;
using proto::MsgType;
using proto::Role;

namespace {
constexpr char kWorkerStateFile[] = "workers.shard";
// Steps to the first time-based checkpoint (the rate is not known yet).
constexpr int64_t kFirstTimedCheckpoint = 50;
}  // namespace

absl::Status Coordinator::LoadRestore() {
  checkpoints_ = std::make_unique<CheckpointManager>(options_.checkpoint);
  last_checkpoint_time_ = absl::Now();
  PS_ASSIGN_OR_RETURN(restore_, checkpoints_->FindRestore());
  job_restore_ = restore_;
  if (!restore_) return absl::OkStatus();
  spdlog::info("resuming from checkpoint {} (step {}, {} servers, {} workers)", restore_->path,
               restore_->step, restore_->num_servers, restore_->num_workers);
  for (const ShardEntry& e : restore_->shards) restore_files_.push_back(restore_->path + "/" + e.file);
  // Worker-held state (allreduce mode) reaches the workers through the store.
  for (const proto::WorkerPosition& p : restore_->workers) {
    if (p.state_file.empty()) continue;
    std::string path = restore_->path + "/" + p.state_file;
    PS_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
    store_.Set("restore/worker_state", Buffer::FromString(std::move(bytes)));
    break;
  }
  last_checkpoint_step_ = restore_->step;
  return absl::OkStatus();
}

int64_t Coordinator::NextCheckpointStep(int64_t after) const {
  const CheckpointOptions& o = options_.checkpoint;
  if (!checkpoints_->enabled()) return -1;
  if (o.every_steps > 0) return (after / o.every_steps + 1) * o.every_steps;
  if (o.every_secs > 0) {
    double secs = absl::ToDoubleSeconds(absl::Now() - last_checkpoint_time_);
    int64_t steps = after - last_checkpoint_step_;
    if (steps <= 0 || secs <= 0) return after + kFirstTimedCheckpoint;
    double rate = steps / secs;
    return after + std::max<int64_t>(1, std::llround(rate * o.every_secs));
  }
  return -1;
}

void Coordinator::AddCheckpointInfo(proto::TableLayout* layout,
                                    std::vector<std::string>* restore_files) {
  int64_t start = 0;
  if (restore_) {
    start = restore_->step;
    layout->restored_step = restore_->step;
    if (restore_->num_workers == options_.num_workers) {
      layout->positions = restore_->workers;
    } else {
      spdlog::warn("the checkpoint was taken with {} workers, this job has {}: data positions are "
                   "not restored (each worker starts its shard over)",
                   restore_->num_workers, options_.num_workers);
      for (int r = 0; r < options_.num_workers; ++r) {
        proto::WorkerPosition p;
        p.rank = r;
        p.clock = restore_->step;
        layout->positions.push_back(p);
      }
    }
  } else {
    restore_files->clear();
  }
  checkpoint_step_ = NextCheckpointStep(start);
  if (options_.checkpoint.every_secs > 0 && options_.checkpoint.every_steps <= 0) {
    checkpoint_step_ = start + kFirstTimedCheckpoint;
  }
  layout->checkpoint_step = checkpoint_step_;
}

void Coordinator::OnCheckpointArrive(const Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("checkpoint arrival from a non-worker"));
  }
  auto body = d.body<proto::CheckpointArrive>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (recovering_) {
    return ReplyError(req, absl::AbortedError("the cluster is recovering from a failure"));
  }
  int rank = m->info.rank;
  body->position.rank = rank;
  if (d.num_payloads() > 0) {
    if (absl::Status st = d.CheckPayload(0, proto::DType::kU8); !st.ok()) return ReplyError(req, st);
    worker_state_ = d.payload(0);
  }
  if (body->position.finished) {
    done_training_[rank] = body->position;
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kCoordinator;
    node_->Reply(req, proto::Encode(h, proto::CheckpointDone{"", checkpoint_step_}));
    MaybeCheckpoint();
    return;
  }
  if (body->step != checkpoint_step_ || saving_) {
    return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                               "worker ", rank, " paused for checkpoint step ", body->step,
                               " but the next checkpoint is at step ", checkpoint_step_)));
  }
  arrived_[rank] = body->position;
  arrive_waiters_.push_back({req.route, req.id});
  MaybeCheckpoint();
}

void Coordinator::MaybeCheckpoint() {
  if (saving_ || checkpoint_step_ < 0 || arrived_.empty() || finishing_) return;
  for (int r = 0; r < options_.num_workers; ++r) {
    if (!arrived_.count(r) && !done_training_.count(r)) return;
  }
  SaveCheckpoint(checkpoint_step_, [this](absl::Status st) {
    if (!st.ok()) {
      spdlog::error("checkpoint at step {} failed ({}); training goes on", checkpoint_step_,
                    st.ToString());
    }
    int64_t done_step = checkpoint_step_;
    checkpoint_step_ = NextCheckpointStep(done_step);
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kCoordinator;
    std::string path = st.ok() ? options_.checkpoint.dir + "/" + CheckpointName(done_step) : "";
    for (const Parked& p : arrive_waiters_) {
      node_->Reply(p.route, p.id, proto::Encode(h, proto::CheckpointDone{path, checkpoint_step_}));
    }
    arrive_waiters_.clear();
    arrived_.clear();
  });
}

void Coordinator::SaveCheckpoint(int64_t step, std::function<void(absl::Status)> done) {
  if (saving_) return done(absl::FailedPreconditionError("a checkpoint is already being written"));
  saving_ = true;
  absl::Time t0 = absl::Now();
  auto path = checkpoints_->Prepare(step);
  if (!path.ok()) {
    saving_ = false;
    return done(path.status());
  }
  auto manifest = std::make_shared<Manifest>();
  manifest->path = *path;
  manifest->step = step;
  manifest->time = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  manifest->num_servers = options_.num_servers;
  manifest->num_workers = options_.num_workers;
  manifest->tables = defined_tables_;
  for (int r = 0; r < options_.num_workers; ++r) {
    proto::WorkerPosition p;
    if (arrived_.count(r)) p = arrived_[r];
    if (done_training_.count(r)) p = done_training_[r];
    p.rank = r;
    manifest->workers.push_back(p);
  }
  if (!worker_state_.empty()) {
    // Worker-held dense state (allreduce mode), sent by worker 0.
    auto w = AtomicFileWriter::Open(*path + "/" + kWorkerStateFile);
    absl::Status st = w.status();
    if (st.ok()) st = (*w)->Append(worker_state_.data(), worker_state_.size());
    if (st.ok()) st = (*w)->Commit();
    if (!st.ok()) {
      saving_ = false;
      return done(st);
    }
    manifest->workers[0].state_file = kWorkerStateFile;
  }
  auto remaining = std::make_shared<int>(options_.num_servers);
  auto failure = std::make_shared<absl::Status>();
  manifest->shards.resize(options_.num_servers);
  const uint64_t gen = checkpoint_gen_;
  proto::Header h;
  h.type = MsgType::kSaveShard;
  h.sender_role = Role::kCoordinator;
  for (int s = 0; s < options_.num_servers; ++s) {
    proto::SaveShardRequest req{*path, step};
    node_->Call(servers_[s]->peer, proto::Encode(h, req), absl::Now() + absl::Minutes(30))
        .OnDone([this, s, remaining, failure, manifest, done, t0, gen](const absl::StatusOr<Message>& reply) {
          if (gen != checkpoint_gen_) return;  // abandoned: the cluster rolled back
          auto d = proto::DecodeReply(reply, absl::StrCat("checkpoint shard of server ", s));
          if (d.ok()) {
            auto saved = d->body<proto::ShardSaved>();
            if (saved.ok()) {
              manifest->shards[s] = ShardEntry{s, saved->file, saved->bytes, saved->checksum};
            } else if (failure->ok()) {
              *failure = saved.status();
            }
          } else if (failure->ok()) {
            *failure = d.status();
          }
          if (--*remaining > 0) return;
          absl::Status st = *failure;
          if (st.ok()) st = checkpoints_->Commit(*manifest);
          saving_ = false;
          if (st.ok()) {
            uint64_t bytes = 0;
            for (const ShardEntry& e : manifest->shards) bytes += e.bytes;
            spdlog::info("checkpoint at step {} written to {} ({} bytes in {} shards, {:.2f}s)",
                         manifest->step, manifest->path, bytes, manifest->shards.size(),
                         absl::ToDoubleSeconds(absl::Now() - t0));
          }
          // The dashboard's checkpoint history and the checkpoint metrics.
          CheckpointRecord record;
          record.step = manifest->step;
          record.duration_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
          for (const ShardEntry& e : manifest->shards) record.bytes += e.bytes;
          record.path = manifest->path;
          record.ok = st.ok();
          if (!st.ok()) record.message = std::string(st.message());
          monitor()->AddCheckpoint(record);
          // `done` picks the next step from the rate since the previous
          // checkpoint (--checkpoint_every_secs): update after it.
          done(st);
          if (st.ok()) {
            last_checkpoint_time_ = absl::Now();
            last_checkpoint_step_ = manifest->step;
          }
        });
  }
}

}  // namespace pstrain::server
