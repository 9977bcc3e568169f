// Coordinator: membership, ranks, the table layout, barriers, heartbeats,
// the rendezvous store and the end of the job.
//
// Nodes register (in any order; they retry until the coordinator is up),
// get a rank, and wait until every expected server and worker has joined.
// The first worker to define the model's tables makes the coordinator
// compute the layout and create the tables on every server; every worker
// then receives the same layout. A node not heard from within the heartbeat
// timeout is declared dead in the log, with its role, rank and address, and
// the job is aborted (every node told to stop). When all workers have
// finished, the servers are told to stop and Run() returns OK.
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
#include "server/coordinator/dashboard/cluster_monitor.h"
#include "server/coordinator/dashboard/observability.h"
#include "server/coordinator/elastic_workers.h"
#include "server/coordinator/rendezvous_store.h"

namespace pstrain::server {

struct CoordinatorOptions {
  std::string bind = "tcp://0.0.0.0:7000";
  std::string advertise_host;  // host put in advertised endpoints (default: hostname)
  int num_servers = 1;
  int num_workers = 1;
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
  // A worker not heard from for this long is dead (zero: heartbeat_timeout).
  absl::Duration worker_timeout = absl::ZeroDuration();
};

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
  void OnStoreSet(const proto::Decoded& d, const RpcRequest& req);
  void OnStoreGet(const proto::Decoded& d, const RpcRequest& req);
  void OnWorkerDone(const proto::Decoded& d, const RpcRequest& req);
  void OnWaitRecovery(const proto::Decoded& d, const RpcRequest& req);
  void OnClaimShard(const proto::Decoded& d, const RpcRequest& req);
  // Elastic workers (ElasticWorkers decides what happens to a shard and the
  // lead role). DropWorker drops dead worker `m`; AdmitReturningWorker takes
  // dropped worker `m` back under its new process `info`; OnRejoin answers a
  // worker that asks whether it returns, re-admitting it on the servers
  // first.
  void DropWorker(Member* m, const std::string& reason);
  void AdmitReturningWorker(Member* m, const proto::NodeInfo& info);
  void OnRejoin(const proto::Decoded& d, const RpcRequest& req);
  // Ends the job when every worker has finished or was dropped.
  void MaybeEndJob();

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
  // shards);
  // layout_ is published when all confirm, then `done` runs.
  void CreateTablesOnServers(std::function<void(absl::Status)> done);
  void Tick();
  void CheckHeartbeats(absl::Time now);
  // Tells every live node to stop, then ends Run() with `status`.
  void Finish(absl::Status status);
  void ReplyError(const RpcRequest& req, const absl::Status& status);
  void ReplyOk(const RpcRequest& req);

  // A worker paused for a checkpoint (CheckpointCoordinator answers it).
  void OnCheckpointArrive(const proto::Decoded& d, const RpcRequest& req);

  // Recovery from a server failure (coordinator_recovery.cc).
  bool CanRecover() const;
  // `dead` failed: every live node rolls back (kRecover) and the cluster
  // waits for it to come back.
  void StartRecovery(Member* dead, const std::string& reason);
  void SendRecover(Member* m);
  // Once every server is up: restore the latest checkpoint everywhere and
  // answer the workers waiting in kWaitRecovery.
  void MaybeFinishRecovery();
  void ExpireRecoveryWaiters(absl::Time now);

  CoordinatorOptions options_;
  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  absl::Time started_;

  // I/O thread state.
  std::vector<std::optional<Member>> servers_;
  std::vector<std::optional<Member>> workers_;
  std::vector<Parked> cluster_waiters_;
  std::vector<TableSpec> defined_tables_;
  std::optional<proto::TableLayout> layout_;
  bool creating_tables_ = false;
  std::vector<Parked> layout_waiters_;
  RendezvousStore store_;
  bool finishing_ = false;

  // Recovery state.
  struct RecoveryWaiter {
    std::string route;
    uint64_t id = 0;
    uint64_t epoch = 0;
    absl::Time deadline;
  };
  uint64_t epoch_ = 0;
  bool recovering_ = false;
  bool restoring_ = false;         // recovery's CreateTables in flight
  std::string recovery_reason_;
  absl::Time recovery_started_;
  std::vector<RecoveryWaiter> recovery_waiters_;

  // The monitor feed, /metrics and the dashboard; stops serving first in
  // the destructor.
  std::unique_ptr<Observability> observability_;
  // The schedule, the workers' pause, the manifests, what servers restore.
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  // Dropped workers, their shards, the lead worker, returning workers.
  std::unique_ptr<ElasticWorkers> elastic_;

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::server
