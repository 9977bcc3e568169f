#include "worker/pipeline/pipeline_worker.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "cluster/coordinator_client.h"
#include "cluster/coordinator_store.h"
#include "cluster/node_info.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"
#include "worker/collective/gloo_collective.h"
#include "worker/pipeline/pipeline_model.h"
#include "worker/pipeline/tensor_parallel.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {
namespace {

// Hands pipeline messages to the stage's PipeComm once it exists. The RPC
// handler is installed before the stage knows its place; messages that
// arrive earlier are refused (the stages meet at a barrier before sending),
// and so are those that arrive while the links are rebuilt after a rollback.
class PipeRouter {
 public:
  void Set(std::shared_ptr<PipeComm> comm) {
    absl::MutexLock lock(&mu_);
    comm_ = std::move(comm);
  }
  // The cluster rolls back: the stage's waits on its neighbours fail now.
  void Interrupt(const absl::Status& why) {
    std::shared_ptr<PipeComm> comm;
    {
      absl::MutexLock lock(&mu_);
      comm = comm_;
    }
    if (comm != nullptr) comm->Interrupt(why);
  }
  void Dispatch(RpcNode* node, const proto::Decoded& d, const RpcRequest& req) {
    std::shared_ptr<PipeComm> comm;
    {
      absl::MutexLock lock(&mu_);
      comm = comm_;
    }
    if (comm == nullptr) {
      node->Reply(req,
                  proto::EncodeError(proto::Role::kWorker, -1,
                                     absl::UnavailableError("this pipeline stage is not ready")));
      return;
    }
    comm->OnRequest(d, req);
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<PipeComm> comm_ ABSL_GUARDED_BY(mu_);
};

// A server failure rolls the cluster back to epoch `announced` (kRecover);
// the stage trains in epoch `current`. Shared with the RPC handler.
struct RecoveryState {
  std::atomic<uint64_t> announced{0};
  std::atomic<uint64_t> current{0};
  std::atomic<PeerId> coordinator{kNoPeer};
};

// What a stage builds for one epoch of the cluster (rebuilt after each
// rollback): the links to its neighbours, its tensor-parallel group and the
// runner that uses both. Torn down in the reverse order.
struct StageParts {
  std::shared_ptr<PipeComm> comm;
  std::unique_ptr<CoordinatorStore> tp_store;
  std::unique_ptr<Collective> tp_group;
  std::unique_ptr<StageRunner> runner;

  // Everything but the links. Closing the group's connections fails a
  // collective a peer is blocked in with this stage.
  void TearGroup() {
    runner.reset();
    tp_group.reset();
    tp_store.reset();
  }
};

// "tcp://host:port" -> "host", where the tensor-parallel group listens;
// loopback for a worker on another transport (tests: in-process).
std::string HostOf(const std::string& endpoint) {
  std::string s = endpoint;
  if (s.rfind("tcp://", 0) != 0) return "127.0.0.1";
  if (size_t p = s.find("://"); p != std::string::npos) s = s.substr(p + 3);
  if (size_t p = s.rfind(':'); p != std::string::npos) s = s.substr(0, p);
  return s;
}

absl::Status CheckOptions(const WorkerOptions& options) {
  const PipelineOptions& p = options.pipeline;
  if (p.stages < 1 || p.replicas < 1 || p.microbatches < 1 || p.tensor_parallel < 1) {
    return absl::InvalidArgumentError(
        "--stages, --replicas, --tensor_parallel and --microbatches must be >= 1");
  }
  if (options.train.lr_scaling != "none" || options.train.warmup_steps > 0) {
    return absl::InvalidArgumentError(
        "--lr_scaling and --warmup_steps are not supported in pipeline mode yet");
  }
  const std::string& device = options.train.model.device;
  if (device != "cpu" && device != "auto") {
    return absl::UnimplementedError(
        absl::StrCat("pipeline mode computes on the CPU (no GPU stage-to-stage "
                     "path yet); --device=",
                     device));
  }
  if (options.train.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  return absl::OkStatus();
}

void PrintResult(const WorkerOptions& options, const PipelineStageResult& r) {
  const PipelineOptions& p = options.pipeline;
  std::string oracle =
      std::isfinite(r.oracle_auc) ? absl::StrFormat(" (oracle %.4f)", r.oracle_auc) : "";
  std::printf(
      "RESULT model=%s mode=pipeline stages=%d replicas=%d tensor_parallel=%d microbatches=%d "
      "schedule=%s eval_auc=%.4f%s eval_logloss=%.4f samples/s=%.0f bubble=%.3f wall=%.1fs\n",
      options.train.model.name.c_str(), p.stages, p.replicas, p.tensor_parallel, p.microbatches,
      ScheduleName(p.schedule), r.train.eval_auc, oracle.c_str(), r.train.eval_logloss,
      r.samples_per_sec, r.bubble, r.wall_seconds);
  std::fflush(stdout);
}

}  // namespace

absl::Status RunPipelineWorker(const WorkerOptions& options, const PipelineRuntime& runtime) {
  PS_RETURN_IF_ERROR(CheckOptions(options));
  const PipelineOptions& pipe = options.pipeline;
  std::unique_ptr<Transport> transport;
  if (runtime.make_transport) {
    transport = runtime.make_transport();
  } else {
    ZmqTransportOptions to;
    to.name = "worker";
    to.curve = options.curve;
    transport = std::make_unique<ZmqTransport>(to);
  }
  auto node = std::make_unique<RpcNode>(std::move(transport));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  RpcNode* raw = node.get();
  auto router = std::make_shared<PipeRouter>();
  auto recovery = std::make_shared<RecoveryState>();
  std::function<void(const absl::Status&)> on_shutdown = runtime.on_shutdown;
  if (!on_shutdown) {
    on_shutdown = [](const absl::Status& why) {
      spdlog::error("stopped by the coordinator: {}", why.ToString());
      std::_Exit(why.ok() ? 0 : 3);
    };
  }
  PS_RETURN_IF_ERROR(node->Start([raw, router, recovery, on_shutdown](RpcRequest&& req) {
    auto d = proto::Decode(req.message);
    if (!d.ok()) {
      raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1, d.status()));
      return;
    }
    switch (d->type()) {
      case proto::MsgType::kPing:
        raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
        return;
      case proto::MsgType::kShutdown:
        raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
        on_shutdown(proto::RemoteStatus(d->header()));
        return;
      case proto::MsgType::kRecover: {
        // A server failed: the cluster rolls back to its latest checkpoint.
        // Stop talking to the servers and to the neighbours now (every
        // stage is told the same); the stage thread waits for the recovery.
        auto notice = d->body<proto::RecoverNotice>();
        if (!notice.ok()) {
          raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1, notice.status()));
          return;
        }
        if (notice->epoch > recovery->current.load()) {
          recovery->announced = std::max(recovery->announced.load(), notice->epoch);
          absl::Status why = absl::AbortedError(absl::StrCat(
              "cluster recovering (epoch ", notice->epoch, "): ", notice->reason));
          raw->Fence(recovery->coordinator.load(), why);
          router->Interrupt(why);
        }
        raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
        return;
      }
      case proto::MsgType::kPipeActivation:
      case proto::MsgType::kPipeGradient:
      case proto::MsgType::kPipeAbort:
        router->Dispatch(raw, *d, req);
        return;
      default:
        raw->Reply(req,
                   proto::EncodeError(proto::Role::kWorker, -1,
                                      absl::UnimplementedError("workers serve no such requests")));
    }
  }));

  CoordinatorClientOptions co;
  co.coordinator = options.coordinator;
  co.role = proto::Role::kWorker;
  co.requested_rank = options.rank;
  co.endpoint = endpoint;
  co.connect_timeout = options.connect_timeout;
  CoordinatorClient coordinator(node.get(), co);
  recovery->coordinator = coordinator.peer();
  PS_ASSIGN_OR_RETURN(proto::ClusterView first, coordinator.Register());
  const int rank = first.your_rank;
  std::function<proto::Heartbeat()> fill;
  if (TrainMetrics* tm = options.train.train_metrics; tm != nullptr) {
    fill = [tm] {
      proto::Heartbeat hb;
      tm->FillHeartbeat(&hb);
      return hb;
    };
  }
  coordinator.StartHeartbeats(absl::Milliseconds(first.heartbeat_interval_ms), fill);
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, coordinator.WaitForCluster(absl::Hours(1)));
  const int tp = pipe.tensor_parallel;
  if (view.num_workers != pipe.stages * pipe.replicas * tp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline mode with ", pipe.replicas, " replicas of ", pipe.stages, " stages of ", tp,
        " tensor-parallel workers needs ", pipe.stages * pipe.replicas * tp,
        " workers; the job has ", view.num_workers));
  }
  const WorkerPlace place = PlaceOf3d(rank, pipe.stages, tp);
  spdlog::info(
      "worker {} of {} at {}: stage {} of {} in replica {} of {}, tensor-parallel rank {} of {}",
      rank, view.num_workers, endpoint, place.stage, pipe.stages, place.replica, pipe.replicas,
      place.tp, tp);

  ModelOptions mo = options.train.model;
  mo.device = "cpu";
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(mo));
  PS_ASSIGN_OR_RETURN(PipelineModelSpec spec,
                      DescribePipelineModel(mo, *model, options.train.batch_size));
  PS_ASSIGN_OR_RETURN(StagePartition partition,
                      PartitionTower(spec, pipe.stages, pipe.stage_layers));
  if (rank == 0) {
    spdlog::info("{} cut into {} stages ({}, {} micro-batches): {}", mo.name, pipe.stages,
                 ScheduleName(pipe.schedule), pipe.microbatches,
                 DescribePartition(spec, partition));
  }
  PS_ASSIGN_OR_RETURN(TensorParallelLayout tp_layout,
                      TensorParallelLayout::Create(model->tables(), spec, partition, tp));
  if (rank == 0 && tp > 1) spdlog::info("{}", tp_layout.Describe());
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      coordinator.DefineTables(tp_layout.tables(), absl::Minutes(10)));
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  KvClientOptions ko;
  ko.rank = rank;
  ko.push_partition_bytes = options.push_partition_bytes;
  auto kv = std::make_unique<KvClient>(node.get(), layout, servers, ko);

  // The stage's links, group and runner of cluster epoch `epoch`. Epoch 0
  // keeps the original names; a rebuilt stage meets under names of its
  // epoch, and its links number their messages from epoch << 40, so nothing
  // of the stage it replaces reaches it.
  auto build = [&](uint64_t epoch, StageParts* parts) -> absl::Status {
    const std::string suffix = epoch == 0 ? std::string() : absl::StrCat("/epoch", epoch);
    if (pipe.stages > 1) {
      PipeCommOptions po;
      po.replica = place.replica;
      po.stage = place.stage;
      po.stages = pipe.stages;
      po.rank = rank;
      // The neighbours are the workers with the same tp rank in the
      // neighbouring stages: T ranks away.
      if (place.stage > 0) {
        po.prev_rank = rank - tp;
        po.prev_endpoint = view.workers[rank - tp].endpoint;
        po.in_width = spec.tower[partition.begin(place.stage)].in;
      }
      if (place.stage + 1 < pipe.stages) {
        po.next_rank = rank + tp;
        po.next_endpoint = view.workers[rank + tp].endpoint;
        po.out_width = spec.tower[partition.end(place.stage) - 1].out;
      }
      po.max_rows = std::max(options.train.batch_size, options.train.eval_batch_size);
      po.max_microbatches = pipe.microbatches;
      po.window = pipe.microbatches + 2;
      po.timeout = pipe.timeout;
      po.ping_interval = pipe.ping_interval;
      po.ping_timeout = pipe.ping_timeout;
      po.first_seq = epoch << 40;
      parts->comm = std::make_shared<PipeComm>(node.get(), po);
      router->Set(parts->comm);
      // A rollback announced meanwhile interrupts these links too.
      if (recovery->announced.load() > epoch) {
        parts->comm->Interrupt(absl::AbortedError("the cluster is rolling back again"));
      }
    }
    StageRunnerOptions ro;
    ro.stage = place.stage;
    ro.stages = pipe.stages;
    ro.microbatches = pipe.microbatches;
    ro.schedule = pipe.schedule;
    // The tensor-parallel group of this stage: T consecutive ranks, meeting
    // through the coordinator's store.
    if (tp > 1) {
      parts->tp_store = std::make_unique<CoordinatorStore>(
          &coordinator, absl::StrCat("collective/tp/", place.replica, "/", place.stage));
      GlooOptions go;
      go.rank = place.tp;
      go.size = tp;
      go.hostname = HostOf(endpoint);
      go.timeout = options.collective_timeout;
      go.prefix += suffix;
      PS_ASSIGN_OR_RETURN(auto gloo, GlooCollective::Create(go, parts->tp_store.get()));
      parts->tp_group = std::move(gloo);
    }
    ro.tp_layout = &tp_layout;
    ro.tp_rank = place.tp;
    ro.tp_group = parts->tp_group.get();
    PS_ASSIGN_OR_RETURN(parts->runner, StageRunner::Create(mo, *model, spec, partition, ro,
                                                           parts->comm.get()));
    // Nobody sends activations before every stage can take them.
    return coordinator.Barrier(absl::StrCat("pipeline/ready", suffix), view.num_workers,
                               absl::Minutes(10));
  };

  const std::string self =
      absl::StrCat("stage ", place.stage, " (worker ", rank, ") of replica ", place.replica);
  uint64_t epoch = layout.epoch;
  recovery->current = epoch;
  absl::StatusOr<PipelineStageResult> result = absl::UnknownError("not trained");
  while (true) {
    StageParts parts;
    absl::Status built = build(epoch, &parts);
    if (!built.ok()) {
      result = Annotate(built, "building the stage");
    } else {
      PipelineTrainer trainer(options.train, pipe, model.get(), parts.runner.get(),
                              parts.comm.get(), kv.get(), &coordinator, rank, &tp_layout.tables());
      trainer.set_interrupted([recovery, epoch] { return recovery->announced.load() > epoch; });
      result = trainer.Run();
    }
    if (result.ok()) break;
    absl::Status st = Annotate(result.status(), self);
    router->Set(nullptr);
    parts.TearGroup();
    // A server failed? Then the cluster rolls back to its latest checkpoint
    // and every stage resumes from there. Possible only with checkpoints;
    // without them the neighbours are told at once.
    const bool told = recovery->announced.load() > epoch;
    const bool checkpoints = kv->layout().checkpoint_step >= 0 || kv->layout().restored_step >= 0;
    absl::StatusOr<proto::Recovered> recovered = absl::UnavailableError("no recovery");
    if (told || checkpoints) {
      recovered =
          coordinator.WaitForRecovery(epoch, told ? absl::Minutes(10) : absl::Seconds(3));
    }
    if (!recovered.ok()) {
      if (recovered.status().code() != absl::StatusCode::kUnavailable) {
        spdlog::error("waiting for the cluster's recovery failed: {}",
                      recovered.status().ToString());
      }
      if (parts.comm != nullptr) parts.comm->Abort(st);
      return st;
    }
    // The links roll back with the cluster: gone before the new ones are
    // built.
    parts.comm.reset();
    spdlog::warn("{}: training interrupted ({}); the cluster recovered: resuming from step {} "
                 "(epoch {})",
                 self, result.status().ToString(),
                 std::max<int64_t>(0, recovered->layout.restored_step), recovered->epoch);
    epoch = recovered->epoch;
    recovery->current = epoch;
    servers.clear();
    for (const auto& s : recovered->view.servers) servers.push_back(s.endpoint);
    kv.reset();
    node->Unfence();
    if (recovery->announced.load() > epoch) {
      // Rolling back again already: keep away from the servers.
      node->Fence(recovery->coordinator.load(),
                  absl::AbortedError("the cluster is rolling back again"));
    }
    kv = std::make_unique<KvClient>(node.get(), std::move(recovered->layout), servers, ko);
  }
  if (runtime.result != nullptr) *runtime.result = *result;
  if (rank == 0 && runtime.print_result) PrintResult(options, *result);
  PS_RETURN_IF_ERROR(coordinator.WorkerDone());
  coordinator.StopHeartbeats();
  router->Set(nullptr);
  node->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::worker
