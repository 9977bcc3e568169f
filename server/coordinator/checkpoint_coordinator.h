// CheckpointCoordinator: the coordinator's part of checkpoints: the
// schedule, the workers' pause, the servers' shards, the manifest, and the
// checkpoint the servers restore from (at the start of the job and after a
// rollback).
//
// Workers pause at the same step (the schedule is in the table layout and in
// each checkpoint's reply, so no worker can miss it): each waits for its last
// push, then reports its position (clock, data epoch and rows) and waits.
// Finished workers report once and count as paused from then on. When every
// worker is paused no gradient is in flight, so the servers' shards form a
// consistent cut; the manifest then records the positions and LATEST moves.
//
// Owned by the Coordinator, which feeds it the workers' arrivals and the
// job's events (tables defined, a worker gone, a rollback). Not
// thread-safe: the coordinator's I/O thread only. It calls the servers
// through a ClusterLink, puts the workers' restored state in the rendezvous
// store and records every checkpoint in the monitor; all three outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/buffer.h"
#include "common/table_spec.h"
#include "proto_msgs/messages.h"
#include "server/coordinator/checkpoint_manager.h"
#include "server/coordinator/coordinator_journal.h"
#include "server/coordinator/cluster_link.h"
#include "server/coordinator/dashboard/cluster_monitor.h"
#include "server/coordinator/rendezvous_store.h"

namespace pstrain::server {

class CheckpointCoordinator {
 public:
  CheckpointCoordinator(CheckpointOptions options, int num_workers, ClusterLink* link,
                        RendezvousStore* store, ClusterMonitor* monitor);
  CheckpointCoordinator(const CheckpointCoordinator&) = delete;
  CheckpointCoordinator& operator=(const CheckpointCoordinator&) = delete;

  bool enabled() const { return manager_.enabled(); }

  // Finds the checkpoint the job resumes from (options.restore), if any, and
  // puts the workers' own state of it in the store.
  absl::Status LoadRestore();
  // FailedPrecondition when the job resumes from a checkpoint of other tables.
  absl::Status CheckTables(const std::vector<TableSpec>& tables) const;
  // The job's tables are `tables` (the manifests record them): fills the
  // checkpoint fields of its layout (schedule, restored step and positions).
  void StartJob(const std::vector<TableSpec>& tables, proto::TableLayout* layout);
  // Every server's shard of the checkpoint they restore from (empty: none).
  const std::vector<std::string>& restore_files() const { return restore_files_; }

  // Worker `rank` paused for checkpoint `arrive.step` (or finished training),
  // sending its own state when it holds some (`state`, may be null).
  // `waiter` is answered when the checkpoint is written (a finished worker:
  // at once), or at once with the error when the step is not the next one.
  void OnArrive(int32_t rank, proto::CheckpointArrive arrive, const Buffer* state, Parked waiter);
  // Worker `rank` left the job (elastic): checkpoints no longer wait for it.
  void OnWorkerLeft(int32_t rank);
  // Every worker is done: whether training went on past the last checkpoint.
  bool FinalDue() const;
  // Writes that final checkpoint; `done` gets its status.
  void WriteFinal(std::function<void(absl::Status)> done);

  // A server failed: a checkpoint in progress is abandoned and the workers
  // paused for it are answered Aborted (they resume through the recovery).
  void Abandon();
  // Every server is back: the servers restore the latest complete checkpoint
  // (none yet: what the job began from), its workers' state goes into the
  // store, and `layout` (the new epoch's) gets its step and positions.
  // DataLoss when the checkpoint cannot be read.
  absl::Status RollBack(proto::TableLayout* layout);
  // The checkpoint the servers restore from, or "" (the initial tables).
  std::string restore_path() const { return restore_ ? restore_->path : std::string(); }
  // The step training ended at (every worker's finished position).
  int64_t FinalStep() const;

  // The journal's part (schedule, history, finished workers); `on_change`
  // runs after each change of it. A restarted coordinator Resume()s it.
  CheckpointJournal Journal() const;
  void set_on_change(std::function<void()> on_change) { on_change_ = std::move(on_change); }
  void Resume(const CheckpointJournal& j);

 private:
  // Fills the checkpoint fields of `layout` from restore_ and schedules the
  // next checkpoint.
  void FillLayout(proto::TableLayout* layout);
  void SetRestoreFiles();
  int64_t NextCheckpointStep(int64_t after) const;
  void Changed() {
    if (on_change_) on_change_();
  }
  void MaybeCheckpoint();
  // Writes a checkpoint at `step` (servers' shards, then the manifest) and
  // calls `done` on the I/O thread.
  void Save(int64_t step, std::function<void(absl::Status)> done);

  CheckpointManager manager_;
  const int num_workers_;
  ClusterLink* const link_;
  RendezvousStore* const store_;
  ClusterMonitor* const monitor_;

  std::vector<TableSpec> tables_;            // the job's, as manifests record them
  std::optional<Manifest> restore_;          // what the servers restore from
  std::optional<Manifest> job_restore_;      // what the job started from
  std::vector<std::string> restore_files_;   // every server's shard of restore_
  int64_t checkpoint_step_ = -1;             // where workers pause next
  std::map<int, proto::WorkerPosition> arrived_;        // by rank, for checkpoint_step_
  std::map<int, proto::WorkerPosition> done_training_;  // by rank
  std::vector<Parked> arrive_waiters_;
  Buffer worker_state_;  // allreduce state sent by worker 0
  bool saving_ = false;
  uint64_t generation_ = 0;  // bumped to abandon a checkpoint in flight
  absl::Time last_checkpoint_time_;
  int64_t last_checkpoint_step_ = 0;
  std::function<void()> on_change_;
};

}  // namespace pstrain::server
