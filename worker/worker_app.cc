#include "worker/worker_app.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "cluster/coordinator_client.h"
#include "cluster/coordinator_store.h"
#include "cluster/node_info.h"
#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"
#include "worker/collective/gloo_collective.h"
#include "worker/collective/nccl_collective.h"
#include "worker/nn/device.h"
#include "worker/dense_replica.h"
#include "worker/pipeline/pipeline_worker.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {
namespace {

// "tcp://host:port" -> "host".
std::string HostOf(const std::string& endpoint) {
  std::string s = endpoint;
  if (size_t p = s.find("://"); p != std::string::npos) s = s.substr(p + 3);
  if (size_t p = s.rfind(':'); p != std::string::npos) s = s.substr(0, p);
  return s;
}

// Ranks of the other workers that do not answer a ping within a second.
std::vector<int> UnresponsiveWorkers(RpcNode& node, const proto::ClusterView& view, int self) {
  std::vector<std::pair<int, RpcFuture>> pings;
  proto::Header h;
  h.type = proto::MsgType::kPing;
  for (const proto::NodeInfo& w : view.workers) {
    if (w.rank == self) continue;
    PeerId p = node.Connect(w.endpoint);
    pings.emplace_back(w.rank, node.Call(p, proto::EncodeHeaderOnly(h), absl::Now() + absl::Seconds(1)));
  }
  std::vector<int> dead;
  for (auto& [rank, f] : pings) {
    if (!proto::DecodeReply(f.Wait(), "ping").ok()) dead.push_back(rank);
  }
  return dead;
}

// The model on options.device; "auto" takes a GPU when there is one.
absl::StatusOr<std::unique_ptr<Model>> CreateModelOnDevice(ModelOptions options, bool* on_gpu) {
  *on_gpu = false;
  if (options.device != "auto") {
    *on_gpu = options.device.rfind("cuda", 0) == 0;
    return CreateModel(options);
  }
  options.device = "cuda";
  auto gpu = CreateModel(options);
  if (gpu.ok()) {
    *on_gpu = true;
    spdlog::info("training on the GPU");
    return gpu;
  }
  if (gpu.status().code() != absl::StatusCode::kUnavailable) return gpu;
  options.device = "cpu";
  return CreateModel(options);
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  if (options.mode == "pipeline") return RunPipelineWorker(options);
  // Live numbers for /metrics and the heartbeats (outlive the RPC node).
  metrics::Registry registry;
  TrainMetrics train_metrics(&registry);
  std::unique_ptr<http::HttpServer> metrics_http;
  if (options.metrics_port != 0) {
    PS_ASSIGN_OR_RETURN(metrics_http, metrics::StartMetricsServer(&registry, options.http_host,
                                                                  options.metrics_port));
    spdlog::info("metrics at {}/metrics", metrics_http->url());
  }
  ZmqTransportOptions to;
  to.name = "worker";
  auto node = std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(to));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  RpcNode* raw = node.get();
  // The coordinator may tell this worker to stop (job aborted elsewhere).
  PS_RETURN_IF_ERROR(node->Start([raw](RpcRequest&& req) {
    auto d = proto::Decode(req.message);
    if (d.ok() && d->type() == proto::MsgType::kPing) {
      raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
      return;
    }
    if (d.ok() && d->type() == proto::MsgType::kShutdown) {
      raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
      absl::Status why = proto::RemoteStatus(d->header());
      spdlog::error("stopped by the coordinator: {}", why.ToString());
      std::_Exit(why.ok() ? 0 : 3);
    }
    raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1,
                                       absl::UnimplementedError("workers serve no requests")));
  }));

  CoordinatorClientOptions co;
  co.coordinator = options.coordinator;
  co.role = proto::Role::kWorker;
  co.requested_rank = options.rank;
  co.endpoint = endpoint;
  co.connect_timeout = options.connect_timeout;
  CoordinatorClient coordinator(node.get(), co);
  PS_ASSIGN_OR_RETURN(proto::ClusterView first, coordinator.Register());
  int rank = first.your_rank;
  spdlog::info("worker {} of {} at {}", rank, first.num_workers, endpoint);
  coordinator.StartHeartbeats(absl::Milliseconds(first.heartbeat_interval_ms), [&train_metrics] {
    proto::Heartbeat hb;
    train_metrics.FillHeartbeat(&hb);
    return hb;
  });
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, coordinator.WaitForCluster(absl::Hours(1)));

  bool model_device_is_gpu = false;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      CreateModelOnDevice(options.train.model, &model_device_is_gpu));
  const bool allreduce = options.mode == "allreduce";
  std::vector<TableSpec> tables = model->tables();
  if (allreduce) {
    for (TableSpec& t : tables) t.on_workers = t.kind == TableKind::kDense;
  }
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      coordinator.DefineTables(tables, absl::Minutes(10)));
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  KvClientOptions ko;
  ko.rank = rank;
  KvClient kv(node.get(), layout, servers, ko);

  // Allreduce mode: the workers' collective group and the dense replica.
  std::unique_ptr<CoordinatorStore> store;
  std::unique_ptr<Collective> collective;
  std::unique_ptr<CollectiveQueue> queue;
  std::unique_ptr<nn::Device> staging;
  std::unique_ptr<DenseReplica> replica;
  if (allreduce) {
    store = std::make_unique<CoordinatorStore>(&coordinator, "collective/workers");
    PeerProbe probe = [&node, &view, rank] { return UnresponsiveWorkers(*node, view, rank); };
    DenseReplicaOptions ro;
    ro.bucket_bytes = options.bucket_bytes;
    ro.overlap = options.overlap;
    // NCCL when the model runs on a GPU (buckets staged through GPU memory),
    // Gloo over TCP otherwise.
    if (model_device_is_gpu && NcclBuilt()) {
      NcclOptions no;
      no.rank = rank;
      no.size = view.num_workers;
      no.timeout = options.collective_timeout;
      no.probe = probe;
      PS_ASSIGN_OR_RETURN(staging, nn::CreateDevice("cuda"));
      PS_ASSIGN_OR_RETURN(collective, CreateNcclCollective(no, store.get()));
      ro.staging = staging.get();
    } else {
      GlooOptions go;
      go.rank = rank;
      go.size = view.num_workers;
      go.hostname = HostOf(endpoint);
      go.timeout = options.collective_timeout;
      go.probe = probe;
      PS_ASSIGN_OR_RETURN(auto gloo, GlooCollective::Create(go, store.get()));
      collective = std::move(gloo);
    }
    queue = std::make_unique<CollectiveQueue>();
    PS_ASSIGN_OR_RETURN(replica, DenseReplica::Create(tables, ro, collective.get(), queue.get()));
    PS_RETURN_IF_ERROR(replica->Broadcast(0));
    spdlog::info("allreduce mode: {} dense tables in {} buckets, summed by {} over {} workers",
                 replica->table_ids().size(), replica->num_buckets(), collective->name(),
                 view.num_workers);
  }

  TrainOptions train = options.train;
  train.train_metrics = &train_metrics;
  Trainer trainer(train, model.get(), &kv, &coordinator, rank, view.num_workers, replica.get());
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (!result.ok()) return result.status();
  PS_RETURN_IF_ERROR(coordinator.WorkerDone());
  coordinator.StopHeartbeats();
  node->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::worker
