// BenchCluster: a whole parameter-server job inside the bench process, on
// real ZeroMQ transports over tcp://127.0.0.1: a coordinator and S
// ParameterServers (each Run() on its own thread, each transport with its
// own I/O thread), and W worker endpoints that have registered, defined the
// tables and hold a KvClient. With `local_workers` below `workers`, the
// remaining workers are expected to join from outside (e.g. a Trainer run
// by the caller) through coordinator_endpoint().
//
// Thread-safety: kv(w) is for one worker thread each; the rest is for the
// thread that owns the cluster.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_client.h"
#include "common/rpc.h"
#include "proto_msgs/messages.h"
#include "server/coordinator/coordinator.h"
#include "server/ps/parameter_server.h"
#include "worker/kv_client.h"

namespace pstrain::bench {

// How the stack's transports are set up (ZmqTransportOptions).
struct StackOptions {
  bool batch_io_thread = false;
  int socket_buffer_bytes = 0;
  int server_threads = 1;  // ServerOptions::threads of every server
  // Pins the servers' I/O threads to one half of the process's CPUs and the
  // workers' to the other half, as if they ran on two hosts (off when the
  // process has fewer than 2 CPUs). See common/cpu_affinity.h.
  bool pin_nodes = false;
  uint64_t push_partition_bytes = 1 << 20;  // KvClientOptions of every worker
  bool pull_f16 = false;                    // KvClientOptions::pull_f16 of every worker
};

// The CPUs the servers' / workers' threads are pinned to (empty: unpinned).
std::vector<int> ServerCpus(const StackOptions& stack);
std::vector<int> WorkerCpus(const StackOptions& stack);

struct BenchClusterOptions {
  int servers = 1;
  int workers = 1;        // workers the job expects
  int local_workers = 1;  // of which this cluster creates (ranks 0..local_workers-1)
  proto::Consistency consistency = proto::Consistency::kAsp;
  std::vector<TableSpec> tables;  // defined by the local workers (if any)
  StackOptions stack;
  // Server s serves /metrics on 127.0.0.1:server_metrics_ports[s] (empty: off).
  std::vector<int> server_metrics_ports;
};

class BenchCluster {
 public:
  static absl::StatusOr<std::unique_ptr<BenchCluster>> Start(const BenchClusterOptions& options);
  // Stops whatever is still running.
  ~BenchCluster();

  const std::string& coordinator_endpoint() const { return coordinator_->endpoint(); }
  worker::KvClient& kv(int w) { return *workers_[w].kv; }
  int num_local_workers() const { return static_cast<int>(workers_.size()); }
  server::ParameterServer& server(int s) { return *servers_[s]; }
  int num_servers() const { return static_cast<int>(servers_.size()); }
  // Where the threads that use kv() should run (empty: anywhere).
  const std::vector<int>& worker_cpus() const { return worker_cpus_; }

  // Reports the local workers done and waits for the job to end (the
  // coordinator stops the servers once every worker is done).
  absl::Status Finish();

 private:
  struct Worker {
    std::unique_ptr<RpcNode> node;
    std::unique_ptr<CoordinatorClient> coord;
    std::unique_ptr<worker::KvClient> kv;
  };

  BenchCluster() = default;
  absl::Status StartWorker(int rank, const BenchClusterOptions& options, Worker* w);
  void StopAll();

  std::unique_ptr<server::Coordinator> coordinator_;
  std::thread coordinator_thread_;
  absl::Status coordinator_status_;
  std::vector<std::unique_ptr<server::ParameterServer>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<absl::Status> server_status_;
  std::vector<Worker> workers_;
  std::vector<int> worker_cpus_;
  bool finished_ = false;
};

// A ZeroMQ transport set up as `stack` says, its I/O thread on `cpus`
// (empty: anywhere).
std::unique_ptr<Transport> MakeTransport(const std::string& name, const StackOptions& stack,
                                         std::vector<int> cpus = {});

// A ZeroMQ-backed RpcNode bound to an ephemeral loopback port, started with
// a handler that acknowledges the coordinator's Shutdown and refuses the
// rest (workers serve no requests).
absl::StatusOr<std::unique_ptr<RpcNode>> StartWorkerNode(const std::string& name,
                                                         const StackOptions& stack,
                                                         std::string* endpoint);

}  // namespace pstrain::bench
