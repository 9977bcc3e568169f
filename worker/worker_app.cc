#include "worker/worker_app.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "cluster/coordinator_client.h"
#include "cluster/coordinator_store.h"
#include "cluster/node_info.h"
#include "common/http/http_server.h"
#include "common/process.h"
#include "common/metrics/metrics_http.h"
#include "common/metrics/process_metrics.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"
#include "worker/collective/nccl_collective.h"
#include "worker/replica_group.h"
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
  // Live numbers for /metrics and the heartbeats (outlive the RPC node).
  metrics::Registry registry;
  std::unique_ptr<http::HttpServer> metrics_http;
  auto serve_metrics = [&]() -> absl::Status {
    if (options.metrics_port == 0) return absl::OkStatus();
    PS_ASSIGN_OR_RETURN(metrics_http, metrics::StartMetricsServer(&registry, options.http_host,
                                                                  options.metrics_port));
    spdlog::info("metrics at {}/metrics", metrics_http->url());
    return absl::OkStatus();
  };
  TrainMetrics train_metrics(&registry);
  if (options.mode == "pipeline") {
    // A stage's steps, samples and loss go to /metrics and the heartbeats
    // (the dashboard); its pipeline statistics to --metrics_out.
    PS_RETURN_IF_ERROR(serve_metrics());
    WorkerOptions staged = options;
    staged.train.train_metrics = &train_metrics;
    return RunPipelineWorker(staged);
  }
  PS_RETURN_IF_ERROR(serve_metrics());
  // A server failure: the cluster rolls back to epoch `recover_epoch`.
  // (Declared before the node, whose handler uses them until it stops.)
  std::atomic<uint64_t> recover_epoch{0}, current_epoch{0};
  std::atomic<PeerId> coordinator_peer{kNoPeer};
  ZmqTransportOptions to;
  to.name = "worker";
  to.curve = options.curve;
  auto node = std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(to));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  RpcNode* raw = node.get();
  const bool allreduce = options.mode == "allreduce";
  // The coordinator may tell this worker to stop (job aborted elsewhere).
  PS_RETURN_IF_ERROR(node->Start([raw, &recover_epoch, &current_epoch,
                                   &coordinator_peer](RpcRequest&& req) {
    auto d = proto::Decode(req.message);
    if (d.ok() && d->type() == proto::MsgType::kRecover) {
      auto notice = d->body<proto::RecoverNotice>();
      if (!notice.ok()) {
        raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1, notice.status()));
        return;
      }
      if (notice->epoch <= current_epoch.load()) {  // late: that recovery is over
        raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
        return;
      }
      // Stop talking to the servers: what is in flight fails now, and so
      // does anything sent before the recovery ends.
      recover_epoch = std::max(recover_epoch.load(), notice->epoch);
      raw->Fence(coordinator_peer.load(),
                 absl::AbortedError(absl::StrCat("cluster recovering (epoch ", notice->epoch, "): ",
                                                 notice->reason)));
      raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
      return;
    }
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
  coordinator_peer = coordinator.peer();
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
  std::vector<TableSpec> tables = model->tables();
  if (allreduce) {
    for (TableSpec& t : tables) t.on_workers = t.kind == TableKind::kDense;
  }
  ApplyLrSchedule(options.train, view.num_workers, &tables);
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      coordinator.DefineTables(tables, absl::Minutes(10)));
  // Elastic workers: a worker dropped earlier and now back either resumes
  // its shard from where the coordinator recorded it, at the step every
  // server takes it back at, or finishes when another worker adopted it.
  uint64_t samples_before = 0;
  if (!allreduce) {
    auto rejoin = coordinator.Rejoin();
    if (!rejoin.ok()) return Annotate(rejoin.status(), "asking whether this worker rejoins");
    switch (rejoin->state) {
      case proto::RejoinState::kNew:
        break;
      case proto::RejoinState::kAdopted:
        spdlog::warn("worker {} was dropped from the job earlier and worker {} adopted the rest of "
                     "its shard (from epoch {} row {}): nothing is left for this worker to train; "
                     "finishing without training",
                     rank, rejoin->adopter, rejoin->position.epoch, rejoin->position.rows);
        if (options.exit_watchdog) ExitWithin(absl::Seconds(10), 0);
        PS_RETURN_IF_ERROR(coordinator.WorkerDone());
        coordinator.StopHeartbeats();
        node->Stop();
        return absl::OkStatus();
      case proto::RejoinState::kResume:
        // Resumed the way a restore from a checkpoint resumes: clock and
        // data position from the layout. Checkpoints do not wait for it.
        layout.restored_step = rejoin->step;
        layout.checkpoint_step = -1;
        layout.positions = {rejoin->position};
        samples_before = rejoin->samples;
        spdlog::info("worker {} re-admitted: it trains from step {}, its shard from epoch {} row {} "
                     "({} samples trained before it was dropped)",
                     rank, rejoin->step, rejoin->position.epoch, rejoin->position.rows,
                     rejoin->samples);
        break;
      default:
        return absl::InvalidArgumentError("the coordinator answered rejoin with an unknown state");
    }
  }
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  KvClientOptions ko;
  ko.rank = rank;
  ko.push_partition_bytes = options.push_partition_bytes;
  auto kv = std::make_unique<KvClient>(node.get(), layout, servers, ko);

  // Allreduce mode: the workers' collective group and the dense replica.
  std::unique_ptr<CoordinatorStore> store;
  std::unique_ptr<ReplicaGroup> group;
  if (allreduce) {
    store = std::make_unique<CoordinatorStore>(&coordinator, "collective/workers");
    ReplicaGroupOptions go;
    go.rank = rank;
    go.size = view.num_workers;
    go.hostname = HostOf(endpoint);
    go.timeout = options.collective_timeout;
    go.probe = [&node, &view, rank] { return UnresponsiveWorkers(*node, view, rank); };
    go.replica.bucket_bytes = options.bucket_bytes;
    go.replica.overlap = options.overlap;
    // NCCL when the model runs on a GPU (buckets staged through GPU memory),
    // Gloo over TCP otherwise.
    go.use_nccl = model_device_is_gpu && NcclBuilt();
    group = std::make_unique<ReplicaGroup>(std::move(go), tables, store.get());
    PS_RETURN_IF_ERROR(group->Build(0));
    spdlog::info("allreduce mode: {} dense tables in {} buckets, summed by {} over {} workers",
                 group->replica()->table_ids().size(), group->replica()->num_buckets(),
                 group->collective()->name(), view.num_workers);
  }

  TrainOptions train = options.train;
  train.train_metrics = &train_metrics;
  train.recover_epoch = &recover_epoch;
  train.samples_before = samples_before;
  uint64_t epoch = layout.epoch;
  current_epoch = epoch;
  while (true) {
    // After a rollback the allreduce group is rebuilt (see below) before the
    // trainer restores its replica from the checkpoint; a failure to rebuild
    // (say, another server failed meanwhile) is one more failed attempt.
    absl::Status built =
        group != nullptr && !group->built() ? group->Build(epoch) : absl::OkStatus();
    absl::StatusOr<TrainResult> result = absl::UnknownError("not trained");
    if (!built.ok()) {
      result = Annotate(built, "rebuilding the allreduce group");
    } else {
      Trainer trainer(train, model.get(), kv.get(), &coordinator, rank, view.num_workers,
                      group != nullptr ? group->replica() : nullptr);
      result = trainer.Run();
    }
    if (result.ok()) break;
    if (group != nullptr) {
      // The dense replica rolls back with the cluster: drop it with its
      // group now, before waiting for the recovery. Closing the group's
      // connections also fails an allreduce a peer is blocked in with this
      // worker, so every worker leaves its step instead of waiting out the
      // collective timeout.
      group->Tear();
    }
    // A server failed? Then the cluster rolls back to its latest checkpoint
    // and this worker resumes from there with the others.
    const bool told = recover_epoch.load() > epoch;
    auto recovered = coordinator.WaitForRecovery(epoch, told ? absl::Minutes(10) : absl::Seconds(3));
    if (!recovered.ok()) {
      if (recovered.status().code() != absl::StatusCode::kUnavailable) {
        spdlog::error("waiting for the cluster's recovery failed: {}", recovered.status().ToString());
      }
      if (options.exit_watchdog) ExitWithin(absl::Seconds(10), 1);
      return result.status();
    }
    spdlog::warn("training interrupted ({}); the cluster recovered: resuming from step {} (epoch {})",
                 result.status().ToString(), std::max<int64_t>(0, recovered->layout.restored_step),
                 recovered->epoch);
    epoch = recovered->epoch;
    current_epoch = epoch;
    servers.clear();
    for (const auto& s : recovered->view.servers) servers.push_back(s.endpoint);
    kv.reset();
    node->Unfence();
    kv = std::make_unique<KvClient>(node.get(), std::move(recovered->layout), servers, ko);
  }
  // The work is done: a stuck teardown must not hold the job up.
  if (options.exit_watchdog) ExitWithin(absl::Seconds(10), 0);
  PS_RETURN_IF_ERROR(coordinator.WorkerDone());
  coordinator.StopHeartbeats();
  node->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::worker
