// ElasticWorkers: the coordinator's part of elastic workers
// (--elastic_workers): which workers were dropped, the shards they left to
// train and who adopts them, the lead worker, and what a returning worker
// trains.
//
// A dead worker is dropped: the servers retire it, so BSP steps and SSP
// bounds stop waiting for it; barriers shrink; its shard's remaining rows,
// from the position of its last heartbeat (rows whose gradients had reached
// the servers), go to the first worker that runs out of its own data
// (kClaimShard), so no row of the epoch is skipped. Rows it trained after
// that heartbeat are trained twice, never lost.
//
// The lead worker (worker 0 until it is dropped) gathers the evaluation,
// writes the summary and saves the model. When the lead is dropped, the
// lowest-ranked worker still in the job (not dropped, not finished) takes
// that over: store key "lead" names it, and workers read it at their
// evaluation rounds, their progress reports and the end of training
// (worker/trainer_lead.cc). The role is never handed back to a returning
// worker, and it moves only once a worker has asked kRejoin
// (parameter-server mode: pipeline and allreduce workers never do, and
// cannot hand it on: the job ends).
//
// Re-admission. A worker process that registers with the rank of a dropped
// worker (or of a live one: a killed worker restarted faster than
// --worker_timeout, whose old process is then dropped first) is the same
// worker coming back. What it trains depends on its shard:
//   - not adopted yet: the orphan is withdrawn and the worker resumes its
//     own shard from the position recorded when it was dropped (its last
//     heartbeat), as a restore from a checkpoint resumes. It is counted in
//     barriers again at once. When it asks (kRejoin, after its tables are
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
// as finished in them, like a dropped one).
//
// Owned by the Coordinator, which keeps membership and liveness and tells
// this part what happened to a worker (a heartbeat, its death, its return).
// Not thread-safe: the coordinator's I/O thread only. It calls the servers
// through a ClusterLink and publishes "lead", "dead/<rank>" and
// "adopted/<rank>" in the rendezvous store; both outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto_msgs/messages.h"
#include "server/coordinator/cluster_link.h"
#include "server/coordinator/rendezvous_store.h"

namespace pstrain::server {

class ElasticWorkers {
 public:
  // `enabled`: --elastic_workers (the store key "lead" tells workers so).
  ElasticWorkers(bool enabled, int num_workers, ClusterLink* link, RendezvousStore* store);
  ElasticWorkers(const ElasticWorkers&) = delete;
  ElasticWorkers& operator=(const ElasticWorkers&) = delete;

  // Worker `rank`'s heartbeat: its data position and samples so far.
  void OnHeartbeat(int32_t rank, const proto::Heartbeat& hb);
  // Whether worker `rank` is out of the job (dead, or back with nothing left).
  bool dropped(int32_t rank) const { return workers_[rank].dropped; }
  int num_dropped() const { return num_dropped_; }

  // Drops dead worker `rank` (`reason` for the log and the error): the
  // servers retire it, barriers shrink and its shard waits for an adopter.
  // When it was the lead, the lowest rank with `in_job(rank)` (registered,
  // not finished) and not dropped takes over; Unavailable when none can,
  // and the job cannot go on. REQUIRES: !dropped(rank).
  absl::Status Drop(int32_t rank, const std::string& reason,
                    const std::function<bool(int32_t)>& in_job);
  // kClaimShard from live worker `adopter`: the first shard nobody adopted
  // yet, or an empty claim.
  proto::ShardClaim Claim(int32_t adopter);
  // Dropped worker `rank` is back as process `info` (registered): decides
  // what it trains, its answer to kRejoin.
  void Readmit(int32_t rank, const proto::NodeInfo& info);

  // A worker asks kRejoin: only parameter-server workers do, and from then
  // on the lead role can move.
  void OnRejoinAsked() { lead_can_move_ = true; }
  // Whether worker `rank` resumes its own shard: the servers must take it
  // back (ReadmitOnServers) before it is answered.
  bool ResumesShard(int32_t rank) const;
  // Worker `rank`'s answer to kRejoin (kNew for a first start), given once.
  proto::Rejoin TakeRejoin(int32_t rank);
  // The journal's part (a restarted coordinator): where dropped worker
  // `rank`'s shard goes on from, and putting that back (the servers retired
  // it already; `adopter` >= 0 when a worker had adopted the shard) along
  // with the lead worker.
  void DroppedPosition(int32_t rank, int32_t* epoch, int64_t* rows, uint64_t* samples) const;
  void RestoreDropped(int32_t rank, int32_t epoch, int64_t rows, uint64_t samples, int32_t adopter);
  void RestoreLead(int32_t lead) { lead_ = lead; }

  // Re-admits worker `rank` on every server (prepare, then commit at the
  // largest proposed step); `done` gets the step or why it failed.
  void ReadmitOnServers(int32_t rank, std::function<void(absl::StatusOr<int64_t>)> done);

 private:
  struct Worker {
    bool dropped = false;
    // The data position of the last heartbeat.
    int32_t data_epoch = 0;
    int64_t data_rows = 0;
    uint64_t samples = 0;
    // Re-admitted workers: samples of the earlier processes (its heartbeats
    // count from zero again), and whether heartbeats behind the position it
    // resumes from are ignored (it reports none before its first step).
    uint64_t samples_before = 0;
    bool resuming = false;
    // A returning worker's answer to kRejoin, set when it registered.
    std::optional<proto::Rejoin> rejoin;
  };
  // A dropped worker's data left to train.
  struct Orphan {
    int32_t rank = -1;
    int32_t epoch = 0;
    int64_t rows = 0;
    uint64_t samples = 0;
    int32_t adopter = -1;
  };

  // The worker taking the lead over from `rank`, or -1.
  int32_t NextLead(int32_t rank, const std::function<bool(int32_t)>& in_job) const;
  void RetireOnServers(int32_t rank);

  const int num_workers_;
  ClusterLink* const link_;
  RendezvousStore* const store_;

  std::vector<Worker> workers_;  // by rank
  std::vector<Orphan> orphans_;
  int num_dropped_ = 0;
  // The lead worker (the lowest-ranked live one when the lead before it was
  // dropped; never handed back), published under store key "lead".
  int32_t lead_ = 0;
  bool lead_can_move_ = false;
};

}  // namespace pstrain::server
