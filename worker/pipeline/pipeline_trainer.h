// PipelineTrainer: the training loop of one pipeline stage (one worker of
// pipeline mode).
//
// Stage 0 of each replica reads the replica's shard of the data (shard r of
// R), plans each batch's ids, pulls its own tables (every embedding table,
// the head's dense tables and its tower layers) and runs the step's
// schedule; the later stages pull only their tower layers and follow the
// activations that arrive: training micro-batches, evaluation micro-batches
// and markers (end of an evaluation round, end of training, end). Every
// stage pushes its gradients once per step, summed over the step's
// micro-batches, with num_samples = the batch's rows; under BSP, where a
// server divides the sum of every pushed table by the samples of all
// pushes, each stage scales its gradients by P so that the update still
// equals the unsplit model's (P pushes of the same rows reach each server).
//
// Parameters are one step stale under ASP/SSP (the next step's pull is
// issued before the current step computes, as in the Trainer); under BSP a
// pull waits for the previous step to close. Evaluations (every N steps and
// at the end) stream the replica's eval shard through the pipeline; the
// last stage scores it, and worker 0 gathers the scores of every replica.
// Worker 0 (stage 0 of replica 0) writes the metrics file: progress lines
// with the pipeline statistics of its replica, evaluations, and the
// summary.
//
// With tensor parallelism (T > 1) every rank of a stage's group runs the
// same schedule on the same micro-batches (stage 0's ranks read the same
// shard); each pushes only its own tables (StageRunner::pushed_tables), and
// only tp rank 0 pushes embeddings, counts samples and reports scores.
// Under BSP every one of the P x T workers of a replica pushes `rows`, so
// the scale is P x T.
//
// Checkpoints (when the layout schedules them) pause every stage at the
// same step once its last push is on the servers; each reports its position
// (stage 0: its data epoch and rows). A run whose layout was restored from a
// checkpoint (after a rollback of the cluster, or --restore) resumes at the
// checkpoint's step, stage 0 past the batches trained before it, so that it
// sees the data an unbroken run would (pipeline_checkpoint.cc, on the
// TrainingLoop it shares with the Trainer: worker/training_loop.h).
//
// Not thread-safe: one thread runs Run().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_client.h"
#include "model/models/model.h"
#include "worker/kv_client.h"
#include "worker/pipeline/pipe_comm.h"
#include "worker/pipeline/pipeline_options.h"
#include "worker/pipeline/pipeline_stats.h"
#include "worker/pipeline/stage_runner.h"
#include "worker/progress.h"
#include "worker/trainer.h"
#include "worker/training_loop.h"

namespace pstrain::worker {

// What a finished run measured on one stage.
struct PipelineStageResult {
  int replica = 0;
  int stage = 0;
  TrainResult train;        // steps, samples of the replica, seconds; eval metrics on worker 0
  double busy_seconds = 0;  // computing (wall)
  double wait_seconds = 0;  // waiting for neighbours (wall)
  uint64_t bytes_sent = 0;  // activations and gradients
  int max_live_microbatches = 0;
  // Worker 0: the job's rate and wall time, and the replica's statistics
  // (bubble, bubble_wall, per stage).
  double samples_per_sec = 0;
  double oracle_auc = 0;  // NaN when unknown
  double wall_seconds = 0;
  double bubble = 0;
  double bubble_wall = 0;
  std::vector<proto::PipeStageReport> reports;
};

class PipelineTrainer {
 public:
  // All pointers must outlive Run(); `comm` is null when stages == 1.
  // `tables` are the job's tables (the model's and any tensor-parallel
  // slices; null: the model's). Worker `rank` sits at PlaceOf3d(rank, P, T).
  PipelineTrainer(TrainOptions options, PipelineOptions pipeline, Model* model, StageRunner* runner,
                  PipeComm* comm, KvClient* kv, CoordinatorClient* coordinator, int rank,
                  const std::vector<TableSpec>* tables = nullptr);
  ~PipelineTrainer();

  absl::StatusOr<PipelineStageResult> Run();

  // Long waits on the coordinator's store give up with Aborted once
  // `interrupted` returns true (the cluster is rolling back). Before Run().
  void set_interrupted(std::function<bool()> interrupted) { interrupted_ = std::move(interrupted); }

 private:
  struct Prepared;

  absl::Status RunFirstStage();
  absl::Status RunLaterStage();
  absl::StatusOr<std::unique_ptr<Prepared>> Prepare(std::shared_ptr<const Batch> batch,
                                                    int64_t clock, bool with_dense);
  absl::Status BindParams(Prepared& p, ParamRefs* params);
  // Gradient buffers of this stage's tables for a step (reused when free).
  void BindGrads(const Prepared* p, GradRefs* grads);
  PushHandle PushGrads(const Prepared* p, uint32_t rows, int64_t clock);
  void AfterStep(const StageStepStats& stats);
  absl::Status SendMarker(proto::PipePhase phase, int64_t step);
  absl::Status FinishTraining(int64_t clock);
  absl::Status EvalRoundFirst(int round, int64_t clock);
  absl::Status EndEvalRound(int round, int64_t clock);
  absl::Status GatherEval(int round, int64_t clock);
  absl::Status WriteSummary();
  // pipeline_checkpoint.cc: the step to start at (0, or the restored
  // checkpoint's); stage 0's `reader` is moved past what was trained.
  absl::StatusOr<int64_t> Resume(DataReader* reader);
  // After step `clock` - 1 (stage 0: of `rows` rows of data epoch
  // `data_epoch`): moves the position on and pauses for a checkpoint due.
  absl::Status CheckpointIfDue(int64_t clock, int data_epoch, int64_t rows);
  // The coordinator's store key "pipeline/<rest>" of this cluster epoch.
  std::string Key(const std::string& rest) const;
  absl::StatusOr<Buffer> WaitForKey(const std::string& key, absl::Duration timeout);

  TrainOptions options_;
  PipelineOptions pipeline_;
  Model* model_;
  StageRunner* runner_;
  PipeComm* comm_;
  KvClient* kv_;
  CoordinatorClient* coordinator_;
  int rank_;
  const std::vector<TableSpec>* tables_;
  WorkerPlace place_;
  // This stage's position (stage 0: in the data), the checkpoints.
  TrainingLoop loop_;
  bool bsp_ = false;

  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<PipelineStats> stats_;  // worker 0
  PipelineStageResult result_;
  std::vector<Buffer> grad_buffers_;  // by table id
  std::vector<float*> grad_data_;
  std::vector<size_t> grad_floats_;
  PushHandle last_push_;
  ParamRefs params_;
  GradRefs grads_;
  absl::Time process_start_;
  absl::Time train_start_;
  absl::Time last_log_;
  int64_t logged_samples_ = 0;
  double loss_sum_ = 0;  // since the last log line
  int64_t loss_rows_ = 0;
  double total_loss_ = 0;
  int64_t total_rows_ = 0;
  std::function<bool()> interrupted_;
};

}  // namespace pstrain::worker
