// Coordinator: one training job's membership (ranks, heartbeats, who is
// alive), its epochs, the table layout, barriers, the rendezvous store and
// the end of the job; parts of its own own the rest (see below).
//
// Nodes register (in any order; they retry until the coordinator is up),
// get a rank, and wait until every expected server and worker has joined.
// The first worker to define the model's tables makes the coordinator
// compute the layout and create the tables on every server; every worker
// then receives the same layout. A node not heard from within the heartbeat
// timeout is declared dead in the log, with its role, rank and address, and
// the job is aborted (every node told to stop), unless a part takes over:
// a server failure starts a recovery (with checkpoints), a worker's death
// drops it (with elastic workers). When all workers have finished, the
// servers are told to stop and Run() returns OK.
//
// This class is the core. The parts, each with its own state behind a
// short interface, are:
//   CheckpointCoordinator  the schedule, the workers' pause, the manifests,
//                          what the servers restore from
//   ElasticWorkers         dropped workers, their orphaned shards, the lead
//                          worker, returning workers
//   ServerRecovery         a recovery under way and the workers waiting for it
//   Observability          the monitor the core feeds, /metrics, the dashboard
// The core receives every request, checks who sent it, and hands it to the
// part it concerns; parts reach the servers through the core's ClusterLink.
//
// All state lives on the RPC node's I/O thread; Run() and RequestStop() may
// be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"
#include "server/coordinator/checkpoint_coordinator.h"
#include "server/coordinator/checkpoint_manager.h"
#include "server/coordinator/cluster_link.h"
#include "server/coordinator/coordinator_journal.h"
#include "server/coordinator/dashboard/cluster_monitor.h"
#include "server/coordinator/dashboard/observability.h"
#include "server/coordinator/elastic_workers.h"
#include "server/coordinator/rendezvous_store.h"
#include "server/coordinator/server_recovery.h"

namespace pstrain::server {

struct CoordinatorOptions {
  std::string bind = "tcp://0.0.0.0:7000";
  std::string advertise_host;  // host put in advertised endpoints (default: hostname)
  int num_servers = 1;
  int num_workers = 1;
  // The job (a job file's text) handed to every node that asks for it
  // (cluster/job_fetch.h); empty: none, each node runs on its own flags.
  std::string job_spec;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // How long to wait for every node to join before giving up.
  absl::Duration join_timeout = absl::Minutes(10);
  proto::Consistency consistency = proto::Consistency::kAsp;
  int staleness = 0;
  uint64_t dense_chunk_floats = 1 << 16;
  // Prometheus metrics at http://http_host:metrics_port/metrics and the
  // dashboard at http://http_host:dashboard_port/ (0: off; one server when
  // the ports are equal).
  int metrics_port = 0;
  int dashboard_port = 0;
  std::string http_host = "0.0.0.0";
  CheckpointOptions checkpoint;
  // With checkpoints: when a server fails, wait for a replacement of the
  // same rank (or the same process heard from again), roll every server
  // back to the latest checkpoint and let the workers resume from it.
  bool recover_servers = true;
  absl::Duration recovery_timeout = absl::Minutes(5);
  // Elastic workers: a worker that stops responding is dropped instead of
  // ending the job; the servers stop waiting for it and the others adopt the
  // rest of its data shard. When it was the lead worker (worker 0 at first)
  // the next live rank takes that role over (parameter-server mode only).
  bool elastic_workers = false;
  // With checkpoints: a worker that fails rolls the cluster back to the
  // latest checkpoint, as a failed server does (the cluster waits for a
  // replacement of its rank, which resumes from the checkpoint's position):
  // every row is trained exactly once, where elastic workers train the
  // rows after a dead worker's last heartbeat twice. Not with
  // elastic_workers; parameter-server and allreduce modes.
  bool recover_workers = false;
  // A worker not heard from for this long is dead (zero: heartbeat_timeout).
  absl::Duration worker_timeout = absl::ZeroDuration();
  // With a checkpoint folder the coordinator journals the job there
  // (coordinator_journal.h). A coordinator that finds the journal of a
  // running job takes it back: it waits this long for the known nodes to
  // register again (keeping their state) and goes on without a rollback.
  absl::Duration resume_timeout = absl::Seconds(120);
  // Ignore the journal found there: start a new job. main() moves the
  // folder's journal and checkpoints aside first (ArchivePreviousJob) and
  // restores nothing unless `checkpoint.restore` names a checkpoint.
  bool new_job = false;
  // A finished job's journal: train on from its latest checkpoint (a
  // longer run: `pstrain local` sets it when --epochs grew) instead of
  // saying that it finished.
  bool continue_job = false;
};

// --new_job: moves what an earlier job left in checkpoint folder `dir` (its
// journal, LATEST and ckpt-* folders) into `dir`/previous-<UTC time>, so the
// new job neither resumes nor prunes them; returns that folder ("" when
// there was nothing to move).
absl::StatusOr<std::string> ArchivePreviousJob(const std::string& dir);

// With a checkpoint folder (and neither options.new_job nor
// options.continue_job): the journal of a job that finished there, which a new start must not train again; nullopt when
// there is none. DataLoss when the journal is damaged.
absl::StatusOr<std::optional<JobJournal>> FinishedJob(const CoordinatorOptions& options);

// What a coordinator started on a finished job does instead of training it
// again: listens at options.bind and answers every node of the job that it
// finished (NothingLeftToDo), so that they exit 0 too (a second
// `docker-compose up` on a finished job ends at once). Returns when each of
// the job's servers and workers has been told, or after `wait`;
// `on_listening` gets the bound endpoint first.
absl::Status ServeFinishedJob(const CoordinatorOptions& options, const JobJournal& job,
                              std::unique_ptr<Transport> transport, absl::Duration wait,
                              const std::function<absl::Status(const std::string&)>& on_listening);

// "asp", "bsp" or "ssp" (any case); InvalidArgument naming --consistency.
absl::StatusOr<proto::Consistency> ParseConsistency(std::string name);
// "asp", "bsp" or "ssp".
const char* ConsistencyName(proto::Consistency c);
// OK when `options` describe a job the coordinator can run; InvalidArgument
// naming the flag otherwise. pstrain_coordinator and `pstrain local` (before
// it starts anything) both check with it.
absl::Status CheckCoordinatorOptions(const CoordinatorOptions& options);

class Coordinator final : private ClusterLink {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(CoordinatorOptions options,
                                                             std::unique_ptr<Transport> transport);
  ~Coordinator();

  // The endpoint nodes should connect to.
  const std::string& endpoint() const { return endpoint_; }
  // Serves until the job finishes (OK), fails (the reason) or is stopped
  // (Cancelled).
  absl::Status Run();
  // Makes Run() return Cancelled after telling every node to stop.
  void RequestStop();
  // Membership, heartbeat numbers and checkpoint history, as the dashboard
  // and /metrics show them (AddCheckpoint records a checkpoint). Never null.
  ClusterMonitor* monitor() const { return observability_->monitor(); }
  // The dashboard's and /metrics' URLs, or "" when not served.
  std::string dashboard_url() const { return observability_->dashboard_url(); }
  std::string metrics_url() const { return observability_->metrics_url(); }

 private:
  struct Member {
    proto::NodeInfo info;
    PeerId peer = kNoPeer;
    absl::Time last_seen;
    bool alive = true;
    bool done = false;
  };

  Coordinator(CoordinatorOptions options, std::unique_ptr<RpcNode> node, std::string endpoint);

  // ClusterLink, for the parts.
  RpcNode& node() override { return *node_; }
  int num_servers() const override { return options_.num_servers; }
  PeerId server_peer(int rank) const override;
  uint64_t epoch() const override { return epoch_; }
  bool finishing() const override { return finishing_; }

  void Handle(RpcRequest&& req);
  void OnRegister(const proto::Decoded& d, const RpcRequest& req);
  void OnGetCluster(const proto::Decoded& d, const RpcRequest& req);
  void OnDefineTables(const proto::Decoded& d, const RpcRequest& req);
  void OnHeartbeat(const proto::Decoded& d, const RpcRequest& req);
  void OnBarrier(const proto::Decoded& d, const RpcRequest& req);
  // Why barrier `name` is not complete for `asker`, for its log: who has
  // not arrived and what the coordinator last heard of each.
  std::string BarrierWait(const std::string& name, const std::string& asker, int participants) const;
  void OnStoreSet(const proto::Decoded& d, const RpcRequest& req);
  void OnStoreGet(const proto::Decoded& d, const RpcRequest& req);
  void OnWorkerDone(const proto::Decoded& d, const RpcRequest& req);
  // Requests a part answers (after the core checked who sent them).
  void OnCheckpointArrive(const proto::Decoded& d, const RpcRequest& req);
  void OnWaitRecovery(const proto::Decoded& d, const RpcRequest& req);
  void OnClaimShard(const proto::Decoded& d, const RpcRequest& req);
  void OnRejoin(const proto::Decoded& d, const RpcRequest& req);

  Member* FindMember(proto::Role role, int32_t rank);
  // The rank `info` registers under: the one it asks for (`requested`), or
  // (-1) the one a lost reply gave it, a free one, or during a recovery the
  // failed server's.
  absl::StatusOr<int32_t> ChooseRank(const proto::NodeInfo& info, int32_t requested) const;
  bool AllJoined() const;
  proto::ClusterView View(int32_t rank) const;
  void ReplyCluster();
  // The layout of `tables` for this job (servers, workers, consistency, epoch).
  absl::StatusOr<proto::TableLayout> JobLayout(const std::vector<TableSpec>& tables) const;
  // Creates layout_'s tables on every server (restoring the checkpoint's
  // shards); layout_ is published when all confirm, then `done` runs.
  void CreateTablesOnServers(std::function<void(absl::Status)> done);
  void Tick();
  void CheckHeartbeats(absl::Time now);

  // Elastic workers: drops dead worker `m` (ElasticWorkers decides what
  // happens to its shard and the lead role); takes dropped worker `m` back
  // under its new process `info`.
  void DropWorker(Member* m, const std::string& reason);
  void AdmitReturningWorker(Member* m, const proto::NodeInfo& info);

  // Recovery from a server failure: the core's epochs. StartRecovery bumps
  // the epoch and rolls every live node back (kRecover); once every server
  // is up, MaybeFinishRecovery restores the latest checkpoint everywhere and
  // answers the workers waiting in kWaitRecovery.
  bool CanRecover() const;
  void StartRecovery(Member* dead, const std::string& reason);
  void SendRecover(Member* m);
  void MaybeFinishRecovery();

  // The journal (coordinator_resume.cc). OpenJournal (in Create) loads the
  // one in the checkpoint folder and takes its job back (ResumeFrom) or
  // starts a new one. Journal() applies a change; a failed write is logged
  // and ends the journal (a restarted coordinator then starts the job over
  // from its latest checkpoint).
  absl::Status OpenJournal();
  JobJournal JournalSnapshot() const;
  void ResumeFrom(const JobJournal& j);
  void Journal(const std::function<absl::Status(CoordinatorJournal&)>& change);
  void JournalMemberOf(const Member& m);
  // While taking a job back: a node registering again, the end of the wait
  // (every known node back), and a node that cannot be part of it.
  // REQUIRES: resuming_.
  void OnResumeRegister(const proto::NodeInfo& info, const RpcRequest& req);
  void MaybeEndResume();
  void CheckResumeTimeout(absl::Time now);
  // A fresh process registered before any known one came back: the journal
  // is set aside and the job starts anew from its latest checkpoint.
  absl::Status StartOver(const std::string& why);
  // The rank a worker identity had, or -1.
  int32_t IdentityRank(const std::string& node_id) const;

  // Ends the job when every worker has finished or was dropped.
  void MaybeEndJob();
  // Tells every live node to stop, then ends Run() with `status`.
  void Finish(absl::Status status);
  void ReplyError(const RpcRequest& req, const absl::Status& status);
  void ReplyOk(const RpcRequest& req);

  CoordinatorOptions options_;
  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  absl::Time started_;

  // I/O thread state: membership, epochs, the layout and the store.
  std::vector<std::optional<Member>> servers_;
  std::vector<std::optional<Member>> workers_;
  std::vector<Parked> cluster_waiters_;
  std::vector<TableSpec> defined_tables_;
  std::optional<proto::TableLayout> layout_;
  bool creating_tables_ = false;
  std::vector<Parked> layout_waiters_;
  // recover_workers: replacement workers defining the tables during a
  // recovery, answered with the restored layout.
  std::vector<Parked> recovery_layout_waiters_;
  RendezvousStore store_;
  uint64_t epoch_ = 0;
  bool finishing_ = false;

  // The journal (null: no checkpoint folder, or it failed), the worker
  // identities it maps to ranks, and the state of a job being taken back.
  std::unique_ptr<CoordinatorJournal> journal_;
  std::map<std::string, int32_t> identities_;
  bool resuming_ = false;
  bool resumed_any_ = false;  // a known node registered again
  absl::Time resume_started_;
  std::vector<std::optional<proto::NodeInfo>> expected_servers_, expected_workers_;
  std::vector<RpcRequest> deferred_;  // requests held until every node is back

  // The parts (I/O thread). observability_ stops serving first in the
  // destructor.
  std::unique_ptr<Observability> observability_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::unique_ptr<ElasticWorkers> elastic_;
  std::unique_ptr<ServerRecovery> recovery_;

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::server
