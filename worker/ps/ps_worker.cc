#include "worker/ps/ps_worker.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <utility>
#include <vector>

#include "cluster/coordinator_store.h"
#include "cluster/node_info.h"
#include "proto_msgs/codec.h"
#include "worker/allreduce/nccl_collective.h"
#include "worker/allreduce/replica_group.h"

namespace pstrain::worker {
namespace {

// A live worker answers a ping at once, even mid-step (its I/O thread does).
constexpr absl::Duration kPingTimeout = absl::Seconds(1);

// Ranks of the other workers that do not answer a ping within kPingTimeout.
std::vector<int> UnresponsiveWorkers(RpcNode& node, const proto::ClusterView& view, int self) {
  std::vector<std::pair<int, RpcFuture>> pings;
  proto::Header h;
  h.type = proto::MsgType::kPing;
  for (const proto::NodeInfo& w : view.workers) {
    if (w.rank == self) continue;
    PeerId p = node.Connect(w.endpoint);
    pings.emplace_back(w.rank, node.Call(p, proto::EncodeHeaderOnly(h), absl::Now() + kPingTimeout));
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

// The job's tables: the model's, dense ones on the workers in allreduce
// mode, learning rates scaled and warmed up as the options say.
std::vector<TableSpec> JobTables(const Model& model, const WorkerOptions& options,
                                 int num_workers) {
  std::vector<TableSpec> tables = model.tables();
  if (options.mode == TrainMode::kAllreduce) {
    for (TableSpec& t : tables) t.on_workers = t.kind == TableKind::kDense;
  }
  ApplyLrSchedule(options.train, num_workers, &tables);
  return tables;
}

// Elastic workers: a worker dropped earlier and now back either resumes its
// shard from where the coordinator recorded it, at the step every server
// takes it back at (`layout` and `train` changed accordingly), or finishes
// when another worker adopted it (false: nothing to train).
absl::StatusOr<bool> AskRejoin(WorkerSession& session, proto::TableLayout* layout,
                            TrainOptions* train) {
  auto rejoin = session.coordinator()->Rejoin();
  if (!rejoin.ok()) return Annotate(rejoin.status(), "asking whether this worker rejoins");
  switch (rejoin->state) {
    case proto::RejoinState::kNew:
      return true;
    case proto::RejoinState::kAdopted:
      spdlog::warn("worker {} was dropped from the job earlier and worker {} adopted the rest of "
                   "its shard (from epoch {} row {}): nothing is left for this worker to train; "
                   "finishing without training",
                   session.rank(), rejoin->adopter, rejoin->position.epoch, rejoin->position.rows);
      return false;
    case proto::RejoinState::kResume:
      // Resumed the way a restore from a checkpoint resumes: clock and data
      // position from the layout. Checkpoints do not wait for it.
      layout->restored_step = rejoin->step;
      layout->checkpoint_step = -1;
      layout->positions = {rejoin->position};
      train->samples_before = rejoin->samples;
      train->readmitted = true;
      spdlog::info("worker {} re-admitted: it trains from step {}, its shard from epoch {} row {} "
                   "({} samples trained before it was dropped)",
                   session.rank(), rejoin->step, rejoin->position.epoch, rejoin->position.rows,
                   rejoin->samples);
      return true;
    default:
      return absl::InvalidArgumentError("the coordinator answered rejoin with an unknown state");
  }
}

// Allreduce mode: the workers' collective group (NCCL when the model runs
// on a GPU, buckets staged through GPU memory; Gloo over TCP otherwise) and
// the dense replica, built for epoch 0. `store` must outlive the group.
absl::StatusOr<std::unique_ptr<ReplicaGroup>> StartReplicaGroup(
    const WorkerOptions& options, WorkerSession& session, const std::vector<TableSpec>& tables,
    bool on_gpu, RendezvousStore* store) {
  const proto::ClusterView& view = session.view();
  ReplicaGroupOptions go;
  go.rank = session.rank();
  go.size = view.num_workers;
  go.hostname = HostOf(session.endpoint());
  go.timeout = options.collective_timeout;
  go.probe = [node = session.node(), &view, rank = go.rank] {
    return UnresponsiveWorkers(*node, view, rank);
  };
  go.replica.bucket_bytes = options.bucket_bytes;
  go.replica.overlap = options.overlap;
  go.gloo_algorithm = options.allreduce_algorithm == "ring" ? GlooOptions::Algorithm::kRing
                                                            : GlooOptions::Algorithm::kBcube;
  go.use_nccl = on_gpu && NcclBuilt();
  auto group = std::make_unique<ReplicaGroup>(std::move(go), tables, store);
  PS_RETURN_IF_ERROR(group->Build(0));
  spdlog::info("allreduce mode: {} dense tables in {} buckets, summed by {} over {} workers",
               group->replica()->table_ids().size(), group->replica()->num_buckets(),
               group->collective()->name(), view.num_workers);
  return group;
}

}  // namespace

absl::Status RunPsWorker(const WorkerOptions& options, const WorkerRuntime& runtime) {
  const bool allreduce = options.mode == TrainMode::kAllreduce;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<WorkerSession> session,
                      WorkerSession::Start(SessionOptionsFor(options, runtime)));
  spdlog::info("worker {} of {} at {}", session->rank(), session->view().num_workers,
               session->endpoint());
  bool on_gpu = false;
  ModelOptions model_options = options.train.model;
  model_options.dropout_stream = static_cast<uint64_t>(session->rank());  // masks per worker
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModelOnDevice(model_options, &on_gpu));
  const std::vector<TableSpec> tables = JobTables(*model, options, session->view().num_workers);
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout, session->DefineTables(tables));
  TrainOptions train = options.train;
  train.recover_epoch = session->announced_epoch();
  std::vector<PendingPartition> pending_partitions;  // across the attempts of a rollback
  train.pending_partitions = &pending_partitions;
  if (!allreduce) {
    PS_ASSIGN_OR_RETURN(bool trains, AskRejoin(*session, &layout, &train));
    if (!trains) return session->Finish();
  }
  session->Connect(std::move(layout));
  std::unique_ptr<CoordinatorStore> store;
  std::unique_ptr<ReplicaGroup> group;
  if (allreduce) {
    store = std::make_unique<CoordinatorStore>(session->coordinator(), "collective/workers");
    PS_ASSIGN_OR_RETURN(group, StartReplicaGroup(options, *session, tables, on_gpu, store.get()));
  }
  RecoveryHooks hooks;
  // The dense replica rolls back with the cluster: dropped with its group
  // before the wait for the recovery. Closing the group's connections also
  // fails an allreduce a peer is blocked in with this worker, so every
  // worker leaves its step instead of waiting out the collective timeout.
  if (group != nullptr) hooks.after_failure = [&group] { group->Tear(); };
  TrainResult result;
  PS_RETURN_IF_ERROR(session->RunWithRecovery(
      [&]() -> absl::Status {
        // After a rollback the group is rebuilt before the trainer restores
        // the replica from the checkpoint; a failure to rebuild (another
        // server failed meanwhile, say) is one more failed attempt.
        if (group != nullptr && !group->built()) {
          PS_RETURN_IF_ERROR(
              Annotate(group->Build(session->epoch()), "rebuilding the allreduce group"));
        }
        Trainer trainer(train, model.get(), session->kv(), session->coordinator(), session->rank(),
                        session->view().num_workers,
                        group != nullptr ? group->replica() : nullptr);
        PS_ASSIGN_OR_RETURN(result, trainer.Run());
        return absl::OkStatus();
      },
      hooks));
  if (runtime.result != nullptr) *runtime.result = result;
  return session->Finish();
}

}  // namespace pstrain::worker
