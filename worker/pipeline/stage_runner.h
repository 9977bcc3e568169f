// StageRunner: the compute of one pipeline stage: its share of the tower
// (and, on stage 0, the head; on the last stage, the loss), run over a
// step's micro-batches in the order of the schedule, with activations and
// gradients exchanged through a PipeComm.
//
// Gradients accumulate over the micro-batches of a step, so that a step
// writes the same gradients (of the summed loss) as the unsplit model's
// TrainStep on the whole batch. Activations of a micro-batch are kept from
// its forward to its backward in a slot; slots are reused, so the stage
// holds at most as many micro-batches as the schedule keeps alive (1F1B:
// P - stage, GPipe: M), which live_microbatches() / max_live_microbatches()
// report.
//
// Not thread-safe: one stage thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/batch.h"
#include "model/models/model.h"
#include "model/nn/device.h"
#include "proto_msgs/messages.h"
#include "model/nn/layer_stack.h"
#include "worker/pipeline/pipe_comm.h"
#include "model/models/feature_head.h"
#include "worker/pipeline/pipeline_model.h"
#include "worker/pipeline/pipeline_options.h"
#include "worker/pipeline/schedule.h"
#include "worker/pipeline/tensor_parallel.h"

namespace pstrain::worker {

struct StageRunnerOptions {
  int stage = 0;
  int stages = 1;
  int microbatches = 1;
  PipeSchedule schedule = PipeSchedule::k1F1B;
  // Tensor parallelism (null layout: none): the layout, this worker's rank
  // in its group and the group's collective (both must outlive the runner).
  const TensorParallelLayout* tp_layout = nullptr;
  int tp_rank = 0;
  Collective* tp_group = nullptr;
};

// One training step's bindings. `params` and `grads` are indexed by the
// job's table ids (the model's, then any tensor-parallel slices); only this
// stage's tables are read and written.
struct StageStepInputs {
  int64_t step = 0;
  std::shared_ptr<const Batch> batch;  // stage 0 only
  const BatchPlan* plan = nullptr;     // stage 0 only
  const ParamRefs* params = nullptr;
  GradRefs* grads = nullptr;
};

// What one training step measured on this stage.
struct StageStepStats {
  int rows = 0;  // of the whole batch
  int microbatches = 0;
  // The step's summed loss: computed on the last stage, and carried back to
  // the earlier stages with the step's last gradient.
  double loss_sum = 0;
  double busy_seconds = 0;                       // wall, computing
  double wait_seconds = 0;                       // wall, waiting for neighbours
  double span_seconds = 0;                       // wall, from the step's first op to its last
  std::vector<float> forward_cpu, backward_cpu;  // CPU seconds per micro-batch
  // Timings of this stage and the later ones (stage order).
  std::vector<proto::PipeStageReport> reports;
};

class StageRunner {
 public:
  // `comm` may be null for a single stage; otherwise it must outlive this.
  static absl::StatusOr<std::unique_ptr<StageRunner>> Create(
      const ModelOptions& model_options, const Model& model, const PipelineModelSpec& spec,
      const StagePartition& partition, const StageRunnerOptions& options, PipeComm* comm);
  ~StageRunner();

  bool first() const { return options_.stage == 0; }
  bool last() const { return options_.stage + 1 == options_.stages; }
  int in_width() const { return in_width_; }  // stage 0: the head's output
  int out_width() const { return tower_->out(); }
  // The dense tables this stage computes with (its tower layers; on stage 0
  // also the head's). Stage 0 also uses every sparse table.
  const std::vector<uint32_t>& dense_tables() const { return dense_tables_; }
  // Of those, the ones this worker pushes (all without tensor parallelism;
  // else its slices, and the replicated tables on tp rank 0).
  const std::vector<uint32_t>& pushed_tables() const { return pushed_tables_; }
  // Whether this worker pushes the embeddings' gradients (stage 0, tp rank 0).
  bool pushes_sparse() const { return first() && options_.tp_rank == 0; }

  // Runs one step's schedule. Stage 0 splits `batch` into min(M, rows)
  // micro-batches; later stages learn the step's shape from its first
  // activation, which must be a training micro-batch of `in.step`.
  absl::StatusOr<StageStepStats> TrainStep(const StageStepInputs& in);

  // Evaluation (forward only). Stage 0: one batch, cut like a training
  // batch, each micro-batch sent on (phase kEval, step = round).
  absl::Status EvalBatch(int64_t round, std::shared_ptr<const Batch> batch, const BatchPlan& plan,
                         const ParamRefs& params);
  // Later stages: one received evaluation micro-batch.
  absl::Status EvalMicrobatch(const PipeReceived& msg, const ParamRefs& params);
  // Last stage: moves out the probabilities and labels scored so far.
  void TakeScores(std::vector<float>* probs, std::vector<float>* labels);

  int live_microbatches() const { return live_; }
  int max_live_microbatches() const { return max_live_; }
  // Totals since creation: wall seconds computing, and inside steps.
  double busy_seconds() const { return busy_total_; }
  double span_seconds() const { return span_total_; }
  // When the first training step began (InfinitePast before).
  absl::Time first_step_start() const { return first_start_; }

 private:
  struct Slot;
  struct StepState;

  StageRunner(const ModelOptions& model_options, const StageRunnerOptions& options, PipeComm* comm,
              std::unique_ptr<nn::Device> device);

  Slot* Acquire();
  void Release(Slot* slot);
  // Binds slot->head_in to rows [begin, begin + rows) of `batch`.
  void BindRows(const Batch& batch, const BatchPlan& plan, int begin, int rows, Slot* slot) const;
  // Runs the head (stage 0) and the tower on a slot's input.
  absl::Status ForwardSlot(const ParamRefs& params, Slot* slot, bool train);
  absl::Status Forward(StepState& st, int mb);
  absl::Status Backward(StepState& st, int mb);
  proto::PipeStageReport OwnReport(const StepState& st) const;

  const ModelOptions model_options_;
  const StageRunnerOptions options_;
  PipeComm* comm_;
  std::unique_ptr<nn::Device> device_;
  std::unique_ptr<FeatureHead> head_;  // stage 0
  std::vector<std::vector<int>> sparse_fields_;  // stage 0: the model's (Model::sparse_fields)
  std::vector<uint32_t> sparse_dims_;             // stage 0: each sparse table's row width
  std::unique_ptr<LayerStack> tower_;
  std::vector<uint32_t> dense_tables_;
  std::vector<uint32_t> pushed_tables_;
  std::vector<uint32_t> sparse_tables_;
  int in_width_ = 0;

  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> free_;
  int live_ = 0;
  int max_live_ = 0;
  std::unique_ptr<Slot> eval_slot_;
  nn::DeviceBuffer d_out_;  // the received gradient (scratch, overwritten)
  nn::DeviceBuffer dz_;     // stage 0: gradient of the head's output
  std::vector<float> probs_, labels_;
  double busy_total_ = 0;
  double span_total_ = 0;
  absl::Time first_start_ = absl::InfinitePast();  // of the first training step
};

// CPU seconds used by the calling thread.
double ThreadCpuSeconds();

}  // namespace pstrain::worker
