#include "bench/bench_cluster.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"

namespace pstrain::bench {
namespace {

constexpr char kLoopback[] = "tcp://127.0.0.1:0";
constexpr absl::Duration kSetupTimeout = absl::Seconds(60);

}  // namespace

std::unique_ptr<Transport> MakeTransport(const std::string& name, const StackOptions& stack,
                                         std::vector<int> cpus) {
  ZmqTransportOptions o;
  o.name = name;
  o.batch_io_thread = stack.batch_io_thread;
  o.socket_buffer_bytes = stack.socket_buffer_bytes;
  o.cpus = std::move(cpus);
  // The I/O threads of nodes sharing the bench's process, told apart by
  // role (train --mode=ps reports the CPU of each): 1 servers, 2 workers,
  // 3 the coordinator.
  o.io_thread_tag = absl::StartsWith(name, "server") ? 1 : absl::StartsWith(name, "worker") ? 2 : 3;
  return std::make_unique<ZmqTransport>(o);
}

std::vector<int> ServerCpus(const StackOptions& stack) {
  return stack.pin_nodes ? SplitAllowedCpus().first : std::vector<int>{};
}
std::vector<int> WorkerCpus(const StackOptions& stack) {
  return stack.pin_nodes ? SplitAllowedCpus().second : std::vector<int>{};
}

absl::StatusOr<std::unique_ptr<RpcNode>> StartWorkerNode(const std::string& name,
                                                         const StackOptions& stack,
                                                         std::string* endpoint) {
  auto node = std::make_unique<RpcNode>(MakeTransport(name, stack, WorkerCpus(stack)));
  PS_ASSIGN_OR_RETURN(*endpoint, node->Bind(kLoopback));
  RpcNode* raw = node.get();
  PS_RETURN_IF_ERROR(node->Start([raw](RpcRequest&& req) {
    auto d = proto::Decode(req.message);
    if (d.ok() && d->type() == proto::MsgType::kShutdown) {
      raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
      return;
    }
    raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1,
                                       absl::UnimplementedError("bench workers serve nothing")));
  }));
  return node;
}

absl::StatusOr<std::unique_ptr<BenchCluster>> BenchCluster::Start(
    const BenchClusterOptions& options) {
  std::unique_ptr<BenchCluster> c(new BenchCluster());
  server::CoordinatorOptions co;
  co.bind = kLoopback;
  co.num_servers = options.servers;
  co.num_workers = options.workers;
  co.consistency = options.consistency;
  // Bench workers send no heartbeats: never declare them dead.
  co.heartbeat_timeout = absl::Hours(24);
  PS_ASSIGN_OR_RETURN(c->coordinator_,
                      server::Coordinator::Create(
                          co, MakeTransport("coordinator", options.stack)));
  server::Coordinator* coord = c->coordinator_.get();
  BenchCluster* self = c.get();
  c->coordinator_thread_ = std::thread([self, coord] {
    pthread_setname_np(pthread_self(), "coordinator");
    self->coordinator_status_ = coord->Run();
  });

  c->server_status_.resize(options.servers);
  for (int s = 0; s < options.servers; ++s) {
    server::ServerOptions so;
    so.coordinator = coord->endpoint();
    so.bind = kLoopback;
    so.rank = s;
    so.threads = options.stack.server_threads;
    if (static_cast<size_t>(s) < options.server_metrics_ports.size()) {
      so.metrics_port = options.server_metrics_ports[s];
      so.http_host = "127.0.0.1";
    }
    PS_ASSIGN_OR_RETURN(auto ps, server::ParameterServer::Create(
                                     so, MakeTransport(absl::StrCat("server", s), options.stack,
                                                       ServerCpus(options.stack))));
    c->servers_.push_back(std::move(ps));
  }
  for (int s = 0; s < options.servers; ++s) {
    server::ParameterServer* ps = c->servers_[s].get();
    absl::Status* out = &c->server_status_[s];
    c->server_threads_.emplace_back([ps, out] {
      pthread_setname_np(pthread_self(), "ps-server");
      *out = ps->Run();
    });
  }

  c->worker_cpus_ = WorkerCpus(options.stack);
  c->workers_.resize(options.local_workers);
  std::vector<absl::Status> status(options.local_workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < options.local_workers; ++w) {
    threads.emplace_back([&, w] { status[w] = self->StartWorker(w, options, &self->workers_[w]); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& st : status) PS_RETURN_IF_ERROR(st);
  return c;
}

absl::Status BenchCluster::StartWorker(int rank, const BenchClusterOptions& options,
                                       Worker* w) {
  std::string endpoint;
  PS_ASSIGN_OR_RETURN(w->node,
                      StartWorkerNode(absl::StrCat("worker", rank), options.stack, &endpoint));
  CoordinatorClientOptions o;
  o.coordinator = coordinator_->endpoint();
  o.role = proto::Role::kWorker;
  o.requested_rank = rank;
  o.endpoint = endpoint;
  o.connect_timeout = kSetupTimeout;
  w->coord = std::make_unique<CoordinatorClient>(w->node.get(), o);
  PS_RETURN_IF_ERROR(w->coord->Register().status());
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, w->coord->WaitForCluster(kSetupTimeout));
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout, w->coord->DefineTables(options.tables, kSetupTimeout));
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  worker::KvClientOptions ko;
  ko.rank = w->coord->rank();
  ko.request_timeout = absl::Seconds(60);
  ko.push_partition_bytes = options.stack.push_partition_bytes;
  ko.pull_f16 = options.stack.pull_f16;
  w->kv = std::make_unique<worker::KvClient>(w->node.get(), layout, servers, ko);
  return absl::OkStatus();
}

absl::Status BenchCluster::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  absl::Status first;
  for (Worker& w : workers_) {
    absl::Status st = w.coord->WorkerDone();
    if (!st.ok() && first.ok()) first = st;
  }
  if (!first.ok()) {
    StopAll();
    return first;
  }
  // The coordinator ends once every worker (local or not) is done.
  if (coordinator_thread_.joinable()) coordinator_thread_.join();
  for (auto& t : server_threads_) t.join();
  server_threads_.clear();
  for (Worker& w : workers_) {
    w.kv.reset();
    w.coord.reset();
    w.node->Stop();
  }
  if (first.ok()) first = coordinator_status_;
  for (const absl::Status& st : server_status_) {
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

void BenchCluster::StopAll() {
  for (auto& s : servers_) s->RequestStop();
  for (auto& t : server_threads_) t.join();
  server_threads_.clear();
  for (Worker& w : workers_) {
    w.kv.reset();
    w.coord.reset();
    if (w.node) w.node->Stop();
  }
  if (coordinator_) coordinator_->RequestStop();
  if (coordinator_thread_.joinable()) coordinator_thread_.join();
}

BenchCluster::~BenchCluster() {
  if (!finished_) StopAll();
  servers_.clear();
  coordinator_.reset();
}

}  // namespace pstrain::bench
