// WorkerSession: what every worker does around its training, whatever its
// mode: the RPC node and the control requests it serves (Ping, Shutdown,
// Recover), registration with the coordinator, heartbeats, the wait for the
// whole cluster, the job's tables and the KvClient, the recovery loop and
// the orderly end. The ps and allreduce workers (worker/ps/ps_worker.h), the
// pipeline worker (worker/pipeline/pipeline_worker.h) and the train bench
// are mode bodies on top of it.
//
// Recovery: a server failure rolls the cluster back to its latest
// checkpoint. On the coordinator's kRecover the session fences the node (every
// call to a server fails now, and so does any sent before the recovery
// ends); RunWithRecovery() then waits for the recovery, reconnects to the
// recovered servers at the new epoch and runs the mode's attempt again.
//
// The session never ends the process: a Shutdown from the coordinator calls
// `on_shutdown` (a worker binary exits there) and then fences the node, so
// that what the worker is waiting for fails and the mode body returns.
//
// Thread-safety: owned and used by the worker's training thread. The control
// handler runs on the node's I/O thread and touches only atomics and the
// hooks (which must be safe to call from that thread).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/coordinator_client.h"
#include "common/rpc.h"
#include "common/transport.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"
#include "worker/kv_client.h"

namespace pstrain::worker {

class TrainMetrics;  // worker/train_metrics.h

struct WorkerSessionOptions {
  std::string coordinator;
  std::string bind = "tcp://0.0.0.0:0";
  std::string advertise_host;  // see cluster/node_info.h AdvertisedEndpoint
  int32_t rank = -1;           // -1: the coordinator assigns one
  absl::Duration connect_timeout = absl::Seconds(60);
  std::string node_id;  // CoordinatorClientOptions::node_id
  // A lost coordinator is waited for this long (CoordinatorClientOptions::
  // reconnect_timeout; zero: not at all); then the session stops like on a
  // Shutdown, with the reason (on_shutdown).
  absl::Duration coordinator_timeout = absl::ZeroDuration();
  // Waiting for every node of the job to register: the nodes of a job may be
  // started by hand or by a scheduler that queues them.
  absl::Duration cluster_timeout = absl::Hours(1);
  // Waiting for the tables: the servers create them (and, in a restored job,
  // load them from the checkpoint) before the coordinator answers.
  absl::Duration tables_timeout = absl::Minutes(10);
  // A worker told of a rollback waits this long for it to end: a replacement
  // server has to start and every server has to load the checkpoint.
  absl::Duration recovery_timeout = absl::Minutes(10);
  // A worker whose training failed before any rollback was announced waits
  // this long for one to begin (the notice may trail the error it caused).
  absl::Duration untold_recovery_wait = absl::Seconds(3);
  // How long a teardown may take before the exit watchdog ends the process.
  absl::Duration exit_grace = absl::Seconds(10);
  // A process of its own: once training ends (or fails for good), a
  // teardown stuck for `exit_grace` ends the process (common/process.h
  // ExitWithin). Off for in-process use.
  bool exit_watchdog = false;
  KvClientOptions kv;  // `rank` is filled in with the worker's rank
  // The heartbeats' body (optional; must outlive the session).
  TrainMetrics* train_metrics = nullptr;

  // The transport of the worker's node. Required.
  std::function<std::unique_ptr<Transport>()> make_transport;
  // The coordinator stopped the job (I/O thread, after the session logged
  // it; optional). A worker process exits here; when it returns, the session
  // fences the node and the mode body's waits fail with the coordinator's
  // reason.
  std::function<void(const absl::Status&)> on_shutdown;
  // Requests other than the control ones (I/O thread; optional): true when
  // handled (replied or queued). Unhandled ones are refused.
  std::function<bool(RpcNode*, const proto::Decoded&, const RpcRequest&)> on_request;
  // A rollback to a newer epoch was announced and the servers are fenced
  // (I/O thread; optional): fail whatever else the worker waits on.
  std::function<void(const absl::Status&)> on_rollback;
};

// What a mode body does around its attempts in RunWithRecovery.
struct RecoveryHooks {
  // Names the worker in the "training interrupted" line and in the final
  // error ("stage 1 (worker 1) of replica 0"); empty: neither.
  std::string who;
  // Without a rollback announced, wait for one only when the job takes
  // checkpoints (otherwise none can come and the error is final at once).
  bool untold_needs_checkpoints = false;
  // After a failed attempt, before waiting: drop what a rollback replaces.
  std::function<void()> after_failure;
  // No recovery came: `final_error` is what the session returns.
  std::function<void(const absl::Status& final_error)> on_give_up;
  // The cluster recovered, before the new KvClient is made.
  std::function<void()> on_recovered;
};

class WorkerSession {
 public:
  // Binds and starts the node, registers (retrying until connect_timeout),
  // starts heartbeats and waits for every node of the job.
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Start(WorkerSessionOptions options);
  // Stops the heartbeats and the node (after Finish(): nothing left to do).
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Submits the job's tables (every worker may; definitions must agree) and
  // returns the layout once the servers hold them.
  absl::StatusOr<proto::TableLayout> DefineTables(const std::vector<TableSpec>& tables);
  // Makes the KvClient for `layout` on the cluster's servers; the session is
  // at the layout's epoch from now on.
  void Connect(proto::TableLayout layout);

  // Runs `attempt` (training at epoch()) until it succeeds. After a failure:
  // hooks.after_failure, then waits for the cluster's recovery; when one
  // comes, hooks.on_recovered, reconnects at the new epoch and tries again;
  // when none comes, hooks.on_give_up and returns the attempt's error.
  // REQUIRES: Connect() was called.
  absl::Status RunWithRecovery(const std::function<absl::Status()>& attempt,
                               const RecoveryHooks& hooks);

  // The work is done: tells the coordinator, stops heartbeats and the node.
  absl::Status Finish();

  RpcNode* node() const { return node_.get(); }
  CoordinatorClient* coordinator() const { return coordinator_.get(); }
  KvClient* kv() const { return kv_.get(); }  // null before Connect()
  int rank() const { return rank_; }
  const std::string& endpoint() const { return endpoint_; }
  // The whole cluster as it first assembled (the workers do not change).
  const proto::ClusterView& view() const { return view_; }
  // The cluster epoch the worker trains in, and the latest one a rollback
  // was announced for (TrainOptions::recover_epoch).
  uint64_t epoch() const { return current_.load(); }
  const std::atomic<uint64_t>* announced_epoch() const { return &announced_; }
  // A rollback past epoch() is announced: the attempt should give up.
  bool rolling_back() const { return announced_.load() > current_.load(); }

 private:
  explicit WorkerSession(WorkerSessionOptions options) : options_(std::move(options)) {}
  absl::Status StartNode();
  absl::Status Join();
  // I/O thread.
  void Handle(RpcRequest&& req);
  void OnRecover(const proto::Decoded& d, const RpcRequest& req);
  void OnShutdown(const proto::Decoded& d, const RpcRequest& req);
  // After a failed attempt: the recovered cluster, or Unavailable when no
  // recovery is under way.
  absl::StatusOr<proto::Recovered> AwaitRecovery(bool untold_needs_checkpoints);
  void Reconnect(proto::Recovered recovered);
  void ArmExitWatchdog(int exit_code) const;

  // Declared before the node: its handler uses them until it stops.
  const WorkerSessionOptions options_;
  std::atomic<uint64_t> announced_{0};
  std::atomic<uint64_t> current_{0};
  std::atomic<PeerId> coordinator_peer_{kNoPeer};
  std::atomic<bool> stopped_{false};  // the coordinator sent Shutdown
  // The client, for the I/O thread's Ping answers (set once it exists).
  std::atomic<CoordinatorClient*> client_{nullptr};

  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  int rank_ = -1;
  proto::ClusterView view_;
  std::unique_ptr<KvClient> kv_;
};

}  // namespace pstrain::worker
