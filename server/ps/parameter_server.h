// ParameterServer: one server process. Registers with the coordinator,
// creates its shards of the tables when told, answers pulls and applies
// pushes under the job's consistency model, and stops when the coordinator
// says so (or exits with an error when the coordinator is gone).
//
// It does the I/O and the dispatch; the rules are others':
//   - the consistency model (ASP, BSP, SSP) is a ConsistencyPolicy
//     (consistency_policy.h), made with the tables: it says when a pull is
//     ready, what a push does to the workers' clocks, when a BSP step is
//     complete, and how workers retire and come back. The server parks the
//     pulls that are not ready (never blocking a thread) and asks again
//     when clocks move;
//   - the tables, and the BspAggregator that sums a BSP step's pushes,
//     belong to the ShardSet (shard_set.h).
//
// Threading: requests are handled on the RPC node's I/O thread, which keeps
// the consistency policy and the parked pulls. The tables belong to the
// ShardSet: on the I/O thread itself with one server thread, or split among
// --server_threads executor threads that each own part of the rows (no
// locks on the hot path either way). Run() and RequestStop() may be called
// from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cluster/coordinator_client.h"
#include "common/rpc.h"
#include "server/ps/consistency_policy.h"
#include "server/ps/server_metrics.h"
#include "server/ps/shard_set.h"

namespace pstrain::http {
class HttpServer;
}

namespace pstrain::server {

struct ServerOptions {
  std::string coordinator;             // endpoint of the coordinator
  std::string bind = "tcp://0.0.0.0:0";
  std::string advertise_host;          // host in the advertised endpoint
  int32_t rank = -1;                   // -1: assigned by the coordinator
  absl::Duration connect_timeout = absl::Seconds(60);
  // Give up when the coordinator has not answered for this long.
  absl::Duration coordinator_timeout = absl::Seconds(30);
  // Serve Prometheus metrics at http://http_host:metrics_port/metrics (0: off).
  int metrics_port = 0;
  std::string http_host = "0.0.0.0";
  // Executor threads owning parts of the shard (1: the I/O thread owns it,
  // unless there is a disk tier).
  int threads = 1;
  // Sparse rows past a memory budget on disk (--server_memory_budget).
  TierConfig tier;
};

struct ServerStats {
  uint64_t pulls = 0;
  uint64_t pushes = 0;
  uint64_t errors = 0;
  uint64_t parked_pulls = 0;
};

class ParameterServer {
 public:
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Create(
      ServerOptions options, std::unique_ptr<Transport> transport);
  ~ParameterServer();

  const std::string& endpoint() const { return endpoint_; }
  // Registers and serves until told to stop. OK on an orderly shutdown.
  absl::Status Run();
  void RequestStop();
  int32_t rank() const { return client_->rank(); }
  ServerStats stats() const;
  // Memory and row counts of this server's table shards, read on the I/O
  // thread that owns them. FailedPrecondition before the tables exist,
  // DeadlineExceeded when the I/O thread does not answer within `timeout`.
  absl::StatusOr<std::vector<TableStats>> StoreStats(absl::Duration timeout) const;
  // This server's metrics (e.g. RecordCheckpointWrite). Never null.
  ServerMetrics* metrics() const { return metrics_.get(); }
  // The /metrics URL, or "" when not served.
  std::string metrics_url() const;

 private:
  // A pull or push being served: the request, and the ops that point into
  // it, alive until the reply is sent (the tables may work on it on other
  // threads meanwhile).
  struct KvCall {
    RpcRequest request;
    proto::Decoded decoded;
    std::vector<KvOp> ops;
    int64_t arrived_ns = 0;  // for the latency metric
    bool values_f16 = false;  // a pull answered in half floats (KvRequest::values_f16)
  };
  struct ParkedPull {
    int64_t clock;
    std::shared_ptr<KvCall> pull;
  };

  ParameterServer(ServerOptions options, std::unique_ptr<RpcNode> node, std::string endpoint);

  void Handle(RpcRequest&& req);
  void OnCreateTables(const proto::Decoded& d, const RpcRequest& req);
  void OnPull(proto::Decoded&& d, RpcRequest&& req);
  void OnPush(proto::Decoded&& d, RpcRequest&& req);
  // kPushPull (push_pull.cc): a worker's push and its next pull in one
  // message, served as the two would be when they arrive back to back, and
  // answered once: the pull's reply after the push's, or the push's error.
  void OnPushPull(const proto::Decoded& d, const RpcRequest& req);
  void OnShutdown(const proto::Decoded& d, const RpcRequest& req);
  void OnDumpRows(const proto::Decoded& d, const RpcRequest& req);
  void OnSaveShard(const proto::Decoded& d, const RpcRequest& req);
  // Runs `work` on saver_ while requests that touch the tables wait, then
  // `done` with its status on the I/O thread, then the requests that waited.
  void OffIoThread(std::function<absl::Status()> work, std::function<void(absl::Status)> done);
  void FinishRestore(const RpcRequest& req, const proto::TableLayout& layout, size_t files,
                     absl::Time t0, absl::Status st);
  // The tables' stats, or the last ones while a checkpoint is being written.
  std::vector<TableStats> CurrentStats();
  void OnRecover(const proto::Decoded& d, const RpcRequest& req);
  // Elastic workers (parameter_server_workers.cc): a dropped worker is
  // retired (kRetireWorker) and, when it comes back, re-admitted from a step
  // the coordinator picks (kReadmitWorker: prepare, then commit).
  void OnRetireWorker(const proto::Decoded& d, const RpcRequest& req);
  void OnReadmitWorker(const proto::Decoded& d, const RpcRequest& req);
  // BSP: applies the open step when the policy closes it (every active
  // worker pushed it), then serves the pulls that waited for it.
  void MaybeCompleteStep();
  void ServePull(std::shared_ptr<KvCall> pull);
  // Checks and validates a pull or push and moves it into a call; null
  // after replying with the error.
  std::shared_ptr<KvCall> StartKvCall(proto::Decoded&& d, RpcRequest&& req, bool is_push,
                                      proto::KvRequest* body);
  void ReleaseParkedPulls();
  absl::Status CheckWorker(const proto::Header& h) const;
  void ReplyError(const RpcRequest& req, const absl::Status& status);
  void Finish(absl::Status status);
  // Creates the metrics and, with a metrics port, serves them
  // (parameter_server_metrics.cc).
  absl::Status StartMetrics();
  // The heartbeat body: sizes and totals for the coordinator (I/O thread).
  proto::Heartbeat HeartbeatBody();

  ServerOptions options_;
  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  std::unique_ptr<CoordinatorClient> client_;

  // I/O thread state.
  int32_t rank_ = -1;  // from the registration reply or the tables request
  std::unique_ptr<ShardSet> store_;
  // Bumped whenever store_ is replaced or dropped: work that finishes on
  // the executors after that changes no consistency state.
  uint64_t generation_ = 0;
  // The consistency rules and the workers' clocks, made with the tables
  // (kept when they are dropped for a recovery); null before.
  std::unique_ptr<ConsistencyPolicy> policy_;
  std::vector<ParkedPull> parked_;  // pulls the policy does not serve yet
  // Checkpoint writes and restores run on saver_, off the I/O thread, so
  // that heartbeats and pings go on however long they take; requests that
  // touch the tables wait in deferred_ until it is done (I/O thread state).
  bool tables_busy_ = false;
  std::vector<RpcRequest> deferred_;
  std::vector<TableStats> last_stats_;
  std::thread saver_;
  std::atomic<uint64_t> pulls_{0}, pushes_{0}, errors_{0}, parked_count_{0};

  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<http::HttpServer> http_;  // stopped first in the destructor

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::server
