#include "server/coordinator/checkpoint_coordinator.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/shard_file.h"
#include "common/file_util.h"
#include "common/status.h"
#include "server/coordinator/table_layout.h"

namespace pstrain::server {

using proto::MsgType;
using proto::Role;

namespace {
constexpr char kWorkerStateFile[] = "workers.shard";
// Where the workers' own state (allreduce mode) waits for them in the store.
constexpr char kWorkerStateKey[] = "restore/worker_state";
// Steps to the first time-based checkpoint (the rate is not known yet).
constexpr int64_t kFirstTimedCheckpoint = 50;
// A server writes and checksums its whole shard before it answers: minutes
// for a big model on a network file system.
constexpr absl::Duration kSaveShardTimeout = absl::Minutes(30);

// The workers' own state saved in checkpoint `m` (allreduce mode), if any.
absl::StatusOr<std::optional<std::string>> ReadWorkerState(const Manifest& m) {
  for (const proto::WorkerPosition& p : m.workers) {
    if (p.state_file.empty()) continue;
    PS_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(m.path + "/" + p.state_file));
    return std::optional<std::string>(std::move(bytes));
  }
  return std::optional<std::string>();
}
}  // namespace

CheckpointCoordinator::CheckpointCoordinator(CheckpointOptions options, int num_workers,
                                             ClusterLink* link, RendezvousStore* store,
                                             ClusterMonitor* monitor)
    : manager_(std::move(options)),
      num_workers_(num_workers),
      link_(link),
      store_(store),
      monitor_(monitor) {}

absl::Status CheckpointCoordinator::LoadRestore() {
  last_checkpoint_time_ = absl::Now();
  PS_ASSIGN_OR_RETURN(restore_, manager_.FindRestore());
  job_restore_ = restore_;
  if (!restore_) return absl::OkStatus();
  spdlog::info("resuming from checkpoint {} (step {}, {} servers, {} workers)", restore_->path,
               restore_->step, restore_->num_servers, restore_->num_workers);
  SetRestoreFiles();
  // Worker-held state (allreduce mode) reaches the workers through the store.
  PS_ASSIGN_OR_RETURN(std::optional<std::string> state, ReadWorkerState(*restore_));
  if (state) store_->Set(kWorkerStateKey, Buffer::FromString(std::move(*state)));
  last_checkpoint_step_ = restore_->step;
  return absl::OkStatus();
}

absl::Status CheckpointCoordinator::CheckTables(const std::vector<TableSpec>& tables) const {
  if (restore_ && !SameTables(restore_->tables, tables)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint ", restore_->path,
                     " holds other tables than this job's model (other model flags?)"));
  }
  return absl::OkStatus();
}

void CheckpointCoordinator::StartJob(const std::vector<TableSpec>& tables,
                                     proto::TableLayout* layout) {
  FillLayout(layout);
  tables_ = tables;
  Changed();
}

CheckpointJournal CheckpointCoordinator::Journal() const {
  CheckpointJournal j;
  j.checkpoint_step = checkpoint_step_;
  j.last_checkpoint_step = last_checkpoint_step_;
  j.job_restore = job_restore_ ? job_restore_->path : std::string();
  j.tables = tables_;
  for (const auto& [rank, p] : done_training_) j.done_training.push_back(p);
  return j;
}

void CheckpointCoordinator::Resume(const CheckpointJournal& j) {
  checkpoint_step_ = j.checkpoint_step;
  last_checkpoint_step_ = j.last_checkpoint_step;
  last_checkpoint_time_ = absl::Now();
  tables_ = j.tables;
  done_training_.clear();
  for (const proto::WorkerPosition& p : j.done_training) done_training_[p.rank] = p;
  job_restore_.reset();
  if (!j.job_restore.empty()) {
    auto m = ReadManifest(j.job_restore);
    if (m.ok()) {
      job_restore_ = *std::move(m);
    } else {
      spdlog::warn("the checkpoint the job began from is unreadable now: {}", m.status().ToString());
    }
  }
}

void CheckpointCoordinator::SetRestoreFiles() {
  restore_files_.clear();
  if (!restore_) return;
  for (const ShardEntry& e : restore_->shards) restore_files_.push_back(restore_->path + "/" + e.file);
}

int64_t CheckpointCoordinator::NextCheckpointStep(int64_t after) const {
  const CheckpointOptions& o = manager_.options();
  if (!enabled()) return -1;
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

void CheckpointCoordinator::FillLayout(proto::TableLayout* layout) {
  int64_t start = 0;
  if (restore_) {
    start = restore_->step;
    layout->restored_step = restore_->step;
    if (restore_->num_workers == num_workers_) {
      layout->positions = restore_->workers;
    } else {
      spdlog::warn("the checkpoint was taken with {} workers, this job has {}: data positions are "
                   "not restored (each worker starts its shard over)",
                   restore_->num_workers, num_workers_);
      for (int r = 0; r < num_workers_; ++r) {
        proto::WorkerPosition p;
        p.rank = r;
        p.clock = restore_->step;
        layout->positions.push_back(p);
      }
    }
  } else {
    restore_files_.clear();
  }
  checkpoint_step_ = NextCheckpointStep(start);
  const CheckpointOptions& o = manager_.options();
  if (o.every_secs > 0 && o.every_steps <= 0) checkpoint_step_ = start + kFirstTimedCheckpoint;
  layout->checkpoint_step = checkpoint_step_;
}

void CheckpointCoordinator::OnArrive(int32_t rank, proto::CheckpointArrive arrive,
                                     const Buffer* state, Parked waiter) {
  arrive.position.rank = rank;
  if (state != nullptr) worker_state_ = *state;
  if (arrive.position.finished) {
    done_training_[rank] = arrive.position;
    Changed();
    link_->node().Reply(waiter.route, waiter.id,
                        CoordinatorReply(proto::CheckpointDone{"", checkpoint_step_}));
    MaybeCheckpoint();
    return;
  }
  if (arrive.step == checkpoint_step_ && saving_ && arrived_.count(rank)) {
    // The same arrival again (re-issued after the coordinator seemed lost).
    arrive_waiters_.push_back(std::move(waiter));
    return;
  }
  if (arrive.step != checkpoint_step_ || saving_) {
    link_->node().Reply(waiter.route, waiter.id,
                        CoordinatorError(absl::FailedPreconditionError(absl::StrCat(
                            "worker ", rank, " paused for checkpoint step ", arrive.step,
                            " but the next checkpoint is at step ", checkpoint_step_))));
    return;
  }
  arrived_[rank] = arrive.position;
  arrive_waiters_.push_back(std::move(waiter));
  MaybeCheckpoint();
}

void CheckpointCoordinator::OnWorkerLeft(int32_t rank) {
  proto::WorkerPosition p;
  p.rank = rank;
  p.finished = true;
  done_training_[rank] = p;
  Changed();
  MaybeCheckpoint();
}

int64_t CheckpointCoordinator::FinalStep() const {
  int64_t final_step = 0;
  for (const auto& [rank, p] : done_training_) final_step = std::max(final_step, p.clock);
  return final_step;
}

bool CheckpointCoordinator::FinalDue() const {
  return enabled() && FinalStep() > last_checkpoint_step_;
}

void CheckpointCoordinator::WriteFinal(std::function<void(absl::Status)> done) {
  Save(FinalStep(), std::move(done));
}

void CheckpointCoordinator::MaybeCheckpoint() {
  if (saving_ || checkpoint_step_ < 0 || arrived_.empty() || link_->finishing()) return;
  for (int r = 0; r < num_workers_; ++r) {
    if (!arrived_.count(r) && !done_training_.count(r)) return;
  }
  Save(checkpoint_step_, [this](absl::Status st) {
    if (!st.ok()) {
      spdlog::error("checkpoint at step {} failed ({}); training goes on", checkpoint_step_,
                    st.ToString());
    }
    int64_t done_step = checkpoint_step_;
    checkpoint_step_ = NextCheckpointStep(done_step);
    if (st.ok()) last_checkpoint_step_ = done_step;  // journaled before the workers go on
    Changed();
    std::string path = st.ok() ? manager_.options().dir + "/" + CheckpointName(done_step) : "";
    for (const Parked& p : arrive_waiters_) {
      link_->node().Reply(p.route, p.id,
                          CoordinatorReply(proto::CheckpointDone{path, checkpoint_step_}));
    }
    arrive_waiters_.clear();
    arrived_.clear();
  });
}

void CheckpointCoordinator::Save(int64_t step, std::function<void(absl::Status)> done) {
  if (saving_) return done(absl::FailedPreconditionError("a checkpoint is already being written"));
  saving_ = true;
  absl::Time t0 = absl::Now();
  auto path = manager_.Prepare(step);
  if (!path.ok()) {
    saving_ = false;
    return done(path.status());
  }
  const int num_servers = link_->num_servers();
  auto manifest = std::make_shared<Manifest>();
  manifest->path = *path;
  manifest->step = step;
  manifest->time = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  manifest->num_servers = num_servers;
  manifest->num_workers = num_workers_;
  manifest->tables = tables_;
  for (int r = 0; r < num_workers_; ++r) {
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
  auto remaining = std::make_shared<int>(num_servers);
  auto failure = std::make_shared<absl::Status>();
  manifest->shards.resize(num_servers);
  const uint64_t generation = generation_;
  proto::Header h;
  h.type = MsgType::kSaveShard;
  h.sender_role = Role::kCoordinator;
  for (int s = 0; s < num_servers; ++s) {
    proto::SaveShardRequest req{*path, step};
    link_->node()
        .Call(link_->server_peer(s), proto::Encode(h, req), absl::Now() + kSaveShardTimeout)
        .OnDone([this, s, remaining, failure, manifest, done, t0,
                 generation](const absl::StatusOr<Message>& reply) {
          if (generation != generation_) return;  // abandoned: the cluster rolled back
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
          if (st.ok()) st = manager_.Commit(*manifest);
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
          monitor_->AddCheckpoint(record);
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

void CheckpointCoordinator::Abandon() {
  ++generation_;
  saving_ = false;
  for (const Parked& p : arrive_waiters_) {
    link_->node().Reply(p.route, p.id,
                        CoordinatorError(absl::AbortedError("the cluster is recovering from a failure")));
  }
  arrive_waiters_.clear();
  arrived_.clear();
}

absl::Status CheckpointCoordinator::RollBack(proto::TableLayout* layout) {
  auto latest = manager_.FindLatest();
  if (!latest.ok()) {
    return absl::DataLossError(
        absl::StrCat("cannot read the latest checkpoint: ", latest.status().message()));
  }
  restore_ = latest->has_value() ? *latest : job_restore_;
  SetRestoreFiles();
  if (restore_) {
    // Worker-held state (allreduce mode: the dense replica and its optimizer
    // state) rolls back too: the workers read it from the store when they
    // resume, so it must be this checkpoint's, not the one the job began from.
    auto state = ReadWorkerState(*restore_);
    if (!state.ok()) {
      return absl::DataLossError(absl::StrCat("cannot read the workers' state in ", restore_->path,
                                              ": ", state.status().message()));
    }
    if (*state) store_->Set(kWorkerStateKey, Buffer::FromString(std::move(**state)));
  }
  FillLayout(layout);
  if (!restore_) {
    // No checkpoint yet: everyone starts over from the initial tables.
    layout->restored_step = 0;
    for (int r = 0; r < num_workers_; ++r) {
      proto::WorkerPosition p;
      p.rank = r;
      layout->positions.push_back(p);
    }
  }
  done_training_.clear();
  for (const proto::WorkerPosition& p : layout->positions) {
    if (p.finished) done_training_[p.rank] = p;
  }
  last_checkpoint_step_ = restore_ ? restore_->step : 0;
  last_checkpoint_time_ = absl::Now();
  Changed();
  return absl::OkStatus();
}

}  // namespace pstrain::server
