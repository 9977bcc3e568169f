#include "worker/pipeline/pipeline_worker.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "cluster/coordinator_client.h"
#include "cluster/coordinator_store.h"
#include "cluster/node_info.h"
#include "proto_msgs/codec.h"
#include "worker/allreduce/gloo_collective.h"
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
  // The session's handler: true for a pipeline message (handed to the
  // stage's links or refused), false for any other.
  bool Route(RpcNode* node, const proto::Decoded& d, const RpcRequest& req) {
    switch (d.type()) {
      case proto::MsgType::kPipeActivation:
      case proto::MsgType::kPipeGradient:
      case proto::MsgType::kPipeAbort:
        Dispatch(node, d, req);
        return true;
      default:
        return false;
    }
  }

 private:
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

  absl::Mutex mu_;
  std::shared_ptr<PipeComm> comm_ ABSL_GUARDED_BY(mu_);
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

absl::Status CheckOptions(const WorkerOptions& options) {
  const PipelineOptions& p = options.pipeline;
  if (p.stages < 1 || p.replicas < 1 || p.microbatches < 1 || p.tensor_parallel < 1) {
    return absl::InvalidArgumentError(
        "--stages, --replicas, --tensor_parallel and --microbatches must be >= 1");
  }
  if (options.train.lr_scaling != "none" || options.train.warmup_steps > 0 ||
      options.train.lr_decay_steps > 0) {
    return absl::InvalidArgumentError(
        "--lr_scaling, --warmup_steps and --lr_decay_steps are not supported in pipeline mode yet");
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

// Where this worker sits in the job and what it computes: fixed for the
// whole job (the stage's links and groups are rebuilt after a rollback).
struct StagePlan {
  WorkerPlace place;
  ModelOptions model_options;  // on the CPU
  std::unique_ptr<Model> model;
  PipelineModelSpec spec;
  StagePartition partition;
  std::optional<TensorParallelLayout> tp_layout;
  std::string self;  // "stage 1 (worker 1) of replica 0"
};

absl::StatusOr<StagePlan> PlanStage(const WorkerOptions& options, const WorkerSession& session) {
  const PipelineOptions& pipe = options.pipeline;
  const int rank = session.rank(), tp = pipe.tensor_parallel;
  const int workers = session.view().num_workers;
  if (workers != pipe.stages * pipe.replicas * tp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline mode with ", pipe.replicas, " replicas of ", pipe.stages, " stages of ", tp,
        " tensor-parallel workers needs ", pipe.stages * pipe.replicas * tp,
        " workers; the job has ", workers));
  }
  StagePlan plan;
  const WorkerPlace& place = plan.place = PlaceOf3d(rank, pipe.stages, tp);
  spdlog::info(
      "worker {} of {} at {}: stage {} of {} in replica {} of {}, tensor-parallel rank {} of {}",
      rank, workers, session.endpoint(), place.stage, pipe.stages, place.replica, pipe.replicas,
      place.tp, tp);
  plan.model_options = options.train.model;
  plan.model_options.device = "cpu";
  PS_ASSIGN_OR_RETURN(plan.model, CreateModel(plan.model_options));
  PS_ASSIGN_OR_RETURN(plan.spec, DescribePipelineModel(plan.model_options, *plan.model,
                                                       options.train.batch_size));
  PS_ASSIGN_OR_RETURN(plan.partition, PartitionTower(plan.spec, pipe.stages, pipe.stage_layers));
  if (rank == 0) {
    spdlog::info("{} cut into {} stages ({}, {} micro-batches): {}", plan.model_options.name,
                 pipe.stages, ScheduleName(pipe.schedule), pipe.microbatches,
                 DescribePartition(plan.spec, plan.partition));
  }
  PS_ASSIGN_OR_RETURN(TensorParallelLayout layout,
                      TensorParallelLayout::Create(plan.model->tables(), plan.spec,
                                                   plan.partition, tp));
  if (rank == 0 && tp > 1) spdlog::info("{}", layout.Describe());
  plan.tp_layout.emplace(std::move(layout));
  plan.self = absl::StrCat("stage ", place.stage, " (worker ", rank, ") of replica ", place.replica);
  return plan;
}

// The links to the neighbouring stages of cluster epoch `epoch`: the workers
// with the same tp rank in the neighbouring stages, T ranks away. They
// number their messages from epoch << 40, so nothing of the stage a rebuilt
// one replaces reaches it.
PipeCommOptions LinkOptions(const WorkerOptions& options, const StagePlan& plan,
                            const WorkerSession& session, uint64_t epoch) {
  const PipelineOptions& pipe = options.pipeline;
  const int rank = session.rank(), tp = pipe.tensor_parallel;
  const auto& workers = session.view().workers;
  PipeCommOptions po;
  po.replica = plan.place.replica;
  po.stage = plan.place.stage;
  po.stages = pipe.stages;
  po.rank = rank;
  if (plan.place.stage > 0) {
    po.prev_rank = rank - tp;
    po.prev_endpoint = workers[rank - tp].endpoint;
    po.in_width = plan.spec.tower[plan.partition.begin(plan.place.stage)].in;
  }
  if (plan.place.stage + 1 < pipe.stages) {
    po.next_rank = rank + tp;
    po.next_endpoint = workers[rank + tp].endpoint;
    po.out_width = plan.spec.tower[plan.partition.end(plan.place.stage) - 1].out;
  }
  po.max_rows = std::max(options.train.batch_size, options.train.eval_batch_size);
  po.max_microbatches = pipe.microbatches;
  po.window = pipe.microbatches + 2;
  po.timeout = pipe.timeout;
  po.ping_interval = pipe.ping_interval;
  po.ping_timeout = pipe.ping_timeout;
  po.first_seq = epoch << 40;
  return po;
}

// The tensor-parallel group of this stage: T consecutive ranks, meeting
// through the coordinator's store under names of `suffix` (the epoch's).
absl::Status JoinTensorParallelGroup(const WorkerOptions& options, const StagePlan& plan,
                                     WorkerSession& session, const std::string& suffix,
                                     StageParts* parts) {
  parts->tp_store = std::make_unique<CoordinatorStore>(
      session.coordinator(),
      absl::StrCat("collective/tp/", plan.place.replica, "/", plan.place.stage));
  GlooOptions go;
  go.rank = plan.place.tp;
  go.size = options.pipeline.tensor_parallel;
  go.hostname = HostOf(session.endpoint());
  go.timeout = options.collective_timeout;
  go.prefix += suffix;
  PS_ASSIGN_OR_RETURN(auto gloo, GlooCollective::Create(go, parts->tp_store.get()));
  parts->tp_group = std::move(gloo);
  return absl::OkStatus();
}

// The stage's links, group and runner of the session's epoch. Epoch 0 keeps
// the original names; a rebuilt stage meets under names of its epoch.
absl::Status BuildStage(const WorkerOptions& options, const StagePlan& plan,
                        WorkerSession& session, PipeRouter& router, StageParts* parts) {
  const PipelineOptions& pipe = options.pipeline;
  const uint64_t epoch = session.epoch();
  const std::string suffix = epoch == 0 ? std::string() : absl::StrCat("/epoch", epoch);
  if (pipe.stages > 1) {
    parts->comm =
        std::make_shared<PipeComm>(session.node(), LinkOptions(options, plan, session, epoch));
    router.Set(parts->comm);
    // A rollback announced meanwhile interrupts these links too.
    if (session.rolling_back()) {
      parts->comm->Interrupt(absl::AbortedError("the cluster is rolling back again"));
    }
  }
  if (pipe.tensor_parallel > 1) {
    PS_RETURN_IF_ERROR(JoinTensorParallelGroup(options, plan, session, suffix, parts));
  }
  StageRunnerOptions ro;
  ro.stage = plan.place.stage;
  ro.stages = pipe.stages;
  ro.microbatches = pipe.microbatches;
  ro.schedule = pipe.schedule;
  ro.tp_layout = &*plan.tp_layout;
  ro.tp_rank = plan.place.tp;
  ro.tp_group = parts->tp_group.get();
  PS_ASSIGN_OR_RETURN(parts->runner, StageRunner::Create(plan.model_options, *plan.model, plan.spec,
                                                         plan.partition, ro, parts->comm.get()));
  // Nobody sends activations before every stage can take them. The stages
  // build their models at once; a slow one may need minutes for large layers.
  constexpr absl::Duration kReadyTimeout = absl::Minutes(10);
  return session.coordinator()->WaitAtBarrier(absl::StrCat("pipeline/ready", suffix),
                                              session.view().num_workers, kReadyTimeout,
                                              "every stage to build its part of the model");
}

}  // namespace

// How long the stages of a pipeline wait for each other at its end: the
// last one flushes its links and leaves (minutes apart only if one hangs).
constexpr absl::Duration kEndTimeout = absl::Minutes(2);

absl::Status RunPipelineWorker(const WorkerOptions& options, const WorkerRuntime& runtime) {
  PS_RETURN_IF_ERROR(CheckOptions(options));
  // The handler is installed before the stage knows its place (PipeRouter).
  auto router = std::make_shared<PipeRouter>();
  WorkerSessionOptions so = SessionOptionsFor(options, runtime);
  so.on_request = [router](RpcNode* node, const proto::Decoded& d, const RpcRequest& req) {
    return router->Route(node, d, req);
  };
  // Every stage is told of a rollback: its waits on its neighbours fail now.
  so.on_rollback = [router](const absl::Status& why) { router->Interrupt(why); };
  PS_ASSIGN_OR_RETURN(std::unique_ptr<WorkerSession> session, WorkerSession::Start(std::move(so)));
  PS_ASSIGN_OR_RETURN(StagePlan plan, PlanStage(options, *session));
  // Every table of the job: the model's and its tensor-parallel slices.
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout, session->DefineTables(plan.tp_layout->tables()));
  session->Connect(std::move(layout));
  StageParts parts;
  RecoveryHooks hooks;
  hooks.who = plan.self;
  // Without checkpoints no recovery can come: the neighbours are told at once.
  hooks.untold_needs_checkpoints = true;
  hooks.after_failure = [&] {
    router->Set(nullptr);
    parts.TearGroup();
  };
  hooks.on_give_up = [&](const absl::Status& st) {
    if (parts.comm != nullptr) parts.comm->Abort(st);
  };
  // The links roll back with the cluster: gone before the new ones are built.
  hooks.on_recovered = [&] { parts.comm.reset(); };
  PipelineStageResult result;
  PS_RETURN_IF_ERROR(session->RunWithRecovery(
      [&]() -> absl::Status {
        const uint64_t epoch = session->epoch();
        PS_RETURN_IF_ERROR(
            Annotate(BuildStage(options, plan, *session, *router, &parts), "building the stage"));
        PipelineTrainer trainer(options.train, options.pipeline, plan.model.get(),
                                parts.runner.get(), parts.comm.get(), session->kv(),
                                session->coordinator(), session->rank(), &plan.tp_layout->tables());
        trainer.set_interrupted([s = session.get(), epoch] {
          return s->announced_epoch()->load() > epoch;
        });
        PS_ASSIGN_OR_RETURN(result, trainer.Run());
        // The stages of this pipeline leave together: a stage's last act is
        // to acknowledge its neighbour's end marker, and a process that then
        // exits at once can lose that reply with its sockets, leaving the
        // neighbour waiting for it until its ping fails (the job failed so
        // under load). The coordinator outlives them all.
        const std::string suffix = epoch == 0 ? std::string() : absl::StrCat("/epoch", epoch);
        return session->coordinator()->WaitAtBarrier(
            absl::StrCat("pipeline/end/", plan.place.replica, suffix),
            options.pipeline.stages * options.pipeline.tensor_parallel, kEndTimeout,
            "the other stages of this pipeline to finish");
      },
      hooks));
  parts.TearGroup();
  parts.comm.reset();  // the router keeps the links until the node stops
  if (runtime.stage_result != nullptr) *runtime.stage_result = result;
  if (session->rank() == 0 && runtime.print_result) PrintResult(options, result);
  absl::Status done = session->Finish();
  router->Set(nullptr);
  return done;
}

}  // namespace pstrain::worker
