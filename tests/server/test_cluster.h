// A whole parameter-server job inside one test process: a coordinator and S
// servers on an in-process network, and W worker endpoints that register
// and get a KvClient. Everything is torn down in the destructor.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/coordinator_client.h"
#include "common/inproc_transport.h"
#include "server/coordinator/coordinator.h"
#include "server/ps/parameter_server.h"
#include "worker/kv_client.h"

namespace pstrain::testing {

struct TestWorker {
  std::unique_ptr<RpcNode> node;
  std::unique_ptr<CoordinatorClient> coord;
  std::unique_ptr<worker::KvClient> kv;
};

class TestCluster {
 public:
  TestCluster(int servers, int workers, proto::Consistency consistency = proto::Consistency::kAsp,
              int staleness = 0, uint64_t chunk = 1 << 16, int server_threads = 1,
              std::function<void(server::CoordinatorOptions*)> configure = nullptr) {
    server::CoordinatorOptions co;
    co.bind = "coord";
    co.num_servers = servers;
    co.num_workers = workers;
    co.consistency = consistency;
    co.staleness = staleness;
    co.dense_chunk_floats = chunk;
    co.heartbeat_timeout = absl::Seconds(30);
    if (configure) configure(&co);  // e.g. elastic workers
    auto c = server::Coordinator::Create(co, std::make_unique<InProcTransport>(&net_));
    EXPECT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    for (int s = 0; s < servers; ++s) {
      server::ServerOptions so;
      so.coordinator = "coord";
      so.bind = "server" + std::to_string(s);
      so.rank = s;
      so.threads = server_threads;
      auto ps = server::ParameterServer::Create(so, std::make_unique<InProcTransport>(&net_));
      EXPECT_TRUE(ps.ok()) << ps.status();
      servers_.push_back(*std::move(ps));
    }
    for (auto& s : servers_) {
      server::ParameterServer* p = s.get();
      server_threads_.emplace_back([p] { (void)p->Run(); });
    }
    workers_.resize(workers);
    for (int w = 0; w < workers; ++w) workers_[w] = NewWorker("worker" + std::to_string(w), w);
  }

  // A worker endpoint `endpoint` registered with rank `rank` (also a worker
  // process coming back); the caller owns it.
  TestWorker NewWorker(const std::string& endpoint, int rank) {
    TestWorker tw;
    tw.node = std::make_unique<RpcNode>(std::make_unique<InProcTransport>(&net_));
    EXPECT_TRUE(tw.node->Bind(endpoint).ok());
    EXPECT_TRUE(tw.node->Start([](RpcRequest&&) {}).ok());
    CoordinatorClientOptions o;
    o.coordinator = "coord";
    o.role = proto::Role::kWorker;
    o.requested_rank = rank;
    o.endpoint = endpoint;
    tw.coord = std::make_unique<CoordinatorClient>(tw.node.get(), o);
    auto view = tw.coord->Register();
    EXPECT_TRUE(view.ok()) << view.status();
    return tw;
  }

  // Defines `tables` from every worker and builds the KvClients.
  void DefineTables(const std::vector<TableSpec>& tables,
                    uint64_t push_partition_bytes = worker::KvClientOptions{}.push_partition_bytes) {
    std::vector<std::thread> threads;
    for (auto& tw : workers_) {
      threads.emplace_back([&tw, &tables, push_partition_bytes] {
        auto view = tw.coord->WaitForCluster(absl::Seconds(20));
        ASSERT_TRUE(view.ok()) << view.status();
        auto layout = tw.coord->DefineTables(tables, absl::Seconds(20));
        ASSERT_TRUE(layout.ok()) << layout.status();
        std::vector<std::string> eps;
        for (const auto& s : view->servers) eps.push_back(s.endpoint);
        worker::KvClientOptions ko;
        ko.rank = tw.coord->rank();
        ko.request_timeout = absl::Seconds(20);
        ko.push_partition_bytes = push_partition_bytes;
        tw.kv = std::make_unique<worker::KvClient>(tw.node.get(), *layout, eps, ko);
      });
    }
    for (auto& t : threads) t.join();
  }

  worker::KvClient& kv(int w) { return *workers_[w].kv; }
  TestWorker& worker(int w) { return workers_[w]; }
  server::ParameterServer& server(int s) { return *servers_[s]; }

  ~TestCluster() {
    for (auto& s : servers_) s->RequestStop();
    for (auto& t : server_threads_) t.join();
    for (auto& w : workers_) {
      w.coord.reset();
      w.kv.reset();
      w.node->Stop();
    }
    coordinator_->RequestStop();
  }

 private:
  InProcNetwork net_;
  std::unique_ptr<server::Coordinator> coordinator_;
  std::vector<std::unique_ptr<server::ParameterServer>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<TestWorker> workers_;
};

// The cluster side of a whole job in one process, for workers the test runs
// itself: a coordinator ("coord") and `servers` parameter servers
// ("server<s>") on an in-process network, each Run() on a thread. Stop()
// (or the destructor) ends them; a worker still running is told to stop.
class InProcServerSide {
 public:
  InProcServerSide(int servers, int workers, proto::Consistency consistency) {
    server::CoordinatorOptions co;
    co.bind = "coord";
    co.num_servers = servers;
    co.num_workers = workers;
    co.consistency = consistency;
    co.dense_chunk_floats = 256;  // split the larger layers over the servers
    co.heartbeat_timeout = absl::Seconds(60);
    auto c = server::Coordinator::Create(co, std::make_unique<InProcTransport>(&net_));
    EXPECT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    coordinator_thread_ = std::thread([this] { (void)coordinator_->Run(); });
    for (int s = 0; s < servers; ++s) {
      server::ServerOptions so;
      so.coordinator = "coord";
      so.bind = "server" + std::to_string(s);
      so.rank = s;
      auto p = server::ParameterServer::Create(so, std::make_unique<InProcTransport>(&net_));
      EXPECT_TRUE(p.ok()) << p.status();
      servers_.push_back(*std::move(p));
    }
    for (auto& p : servers_) server_threads_.emplace_back([s = p.get()] { (void)s->Run(); });
  }
  ~InProcServerSide() { Stop(); }

  InProcNetwork* net() { return &net_; }
  server::ParameterServer& server(int s) { return *servers_[s]; }
  // Any thread; the first call stops everything.
  void Stop() {
    if (stopped_.exchange(true)) return;
    coordinator_->RequestStop();
    for (auto& p : servers_) p->RequestStop();
    for (auto& t : server_threads_) t.join();
    coordinator_thread_.join();
  }

 private:
  InProcNetwork net_;
  std::unique_ptr<server::Coordinator> coordinator_;
  std::thread coordinator_thread_;
  std::vector<std::unique_ptr<server::ParameterServer>> servers_;
  std::vector<std::thread> server_threads_;
  std::atomic<bool> stopped_{false};
};

inline TableSpec DenseSpec(uint32_t id, const std::string& name, uint64_t size, OptimizerConfig opt,
                           InitializerConfig init = {}) {
  TableSpec t;
  t.id = id;
  t.name = name;
  t.kind = TableKind::kDense;
  t.size = size;
  t.optimizer = opt;
  t.init = init;
  return t;
}

inline TableSpec SparseSpec(uint32_t id, const std::string& name, uint32_t dim, OptimizerConfig opt,
                            InitializerConfig init = {}) {
  TableSpec t;
  t.id = id;
  t.name = name;
  t.kind = TableKind::kSparse;
  t.dim = dim;
  t.optimizer = opt;
  t.init = init;
  return t;
}

inline OptimizerConfig Sgd(float lr) {
  OptimizerConfig o;
  o.kind = OptimizerKind::kSgd;
  o.lr = lr;
  return o;
}

}  // namespace pstrain::testing
