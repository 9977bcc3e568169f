// ModelBase: what the CTR models share behind the Model contract: the table
// list, Plan() (per-table id dedup with a reused open-addressing map), the
// validation of a step's batch, plan and bindings, and the staging of a
// step's inputs, parameters and gradients on the model's Device (zero copies
// on the CPU; packed transfers on a GPU). Subclasses declare their tables in
// their constructor and implement Reserve/Forward/Backward on device
// pointers, on chunks of the batch's rows. Not thread-safe: one trainer
// thread per instance.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/models/feature_head.h"
#include "model/models/id_deduper.h"
#include "model/models/model.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/dropout.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

// On the CPU a batch runs through the network in chunks of this many rows, so
// that each chunk's activations stay in the core's caches from one layer to
// the next (dense gradients accumulate over the chunks). GPUs take the whole
// batch at once.
inline constexpr int kCpuChunkRows = 256;

// InvalidArgument unless every width of the MLP option `what` is positive.
absl::Status CheckWidths(const char* what, const std::vector<int>& widths);

class ModelBase : public Model {
 public:
  const std::vector<TableSpec>& tables() const final { return registry_.tables(); }
  const std::vector<uint32_t>& sparse_tables() const final { return registry_.sparse_ids(); }
  const std::vector<std::vector<int>>& sparse_fields() const final {
    return registry_.sparse_fields();
  }
  void Plan(const Batch& batch, BatchPlan* plan) const final;
  absl::StatusOr<StepOutput> TrainStep(const Batch& batch, const BatchPlan& plan,
                                       const ParamRefs& params, GradRefs* grads) final;
  absl::Status Predict(const Batch& batch, const BatchPlan& plan, const ParamRefs& params,
                       std::span<float> probs) final;

  const std::vector<ModelHead>& heads() const final { return heads_; }
  const ModelOptions& options() const { return options_; }
  // How sparse field `field`'s bags are pooled (ModelOptions::pooling).
  nn::Pooling FieldPooling(size_t field) const {
    return worker::FieldPooling(options_, field);
  }
  const nn::Device& device() const { return *device_; }

 protected:
  // One step's data, as device pointers.
  struct StepData {
    int batch = 0;
    nn::ConstMatrixView dense;           // [B x num_dense]
    const float* labels = nullptr;       // [B]; null in Predict
    std::vector<const float*> params;    // by table id
    std::vector<float*> grads;           // by table id; empty in Predict
    std::vector<nn::Bags> bags;          // by (sparse position, slot), see Bag()
    std::vector<uint32_t> bag_begin;     // first bags entry of each sparse position
    std::vector<size_t> table_floats;    // by table id: floats bound this step
    // Set on the batch's last chunk of a TrainStep whose caller asked to be
    // told: subclasses pass it to Mlp::Backward / call it for each dense
    // table whose gradient is final. Tables not reported are reported when
    // the step ends.
    const std::function<void(uint32_t)>* grad_ready = nullptr;
    // This chunk's dropout for the towers (rate 0 in Predict).
    nn::DropoutRun dropout;

    // The bags of the `slot`-th field served by the sparse table at BatchPlan
    // position `sparse_pos`.
    const nn::Bags& Bag(int sparse_pos, int slot = 0) const {
      return bags[bag_begin[sparse_pos] + slot];
    }
  };

  ModelBase(const ModelOptions& options, std::unique_ptr<nn::Device> device);

  TableRegistry& registry() { return registry_; }
  nn::Device& device() { return *device_; }
  // A model of several outputs (or a regression one) declares them here, in
  // its constructor; Forward then writes [B x heads] logits.
  void SetHeads(std::vector<ModelHead> heads) { heads_ = std::move(heads); }

  // Grows the subclass's scratch for `batch` rows (no-op when large enough).
  // Forward/Backward then see at most that many rows at a time.
  virtual absl::Status Reserve(int batch) = 0;
  // Writes the logits of the batch into `logits` ([B x heads], a view).
  virtual absl::Status Forward(const StepData& step, nn::MatrixView logits) = 0;
  // Writes the gradients of every table given the logits of the preceding
  // Forward on the same rows and dL/dlogits ([B x heads], may be modified).
  // Sparse gradients arrive zeroed: always add to them. Dense ones are
  // overwritten, or added to with `accumulate` (the batch's later chunks).
  virtual absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                                nn::MatrixView dlogits, bool accumulate) = 0;

 private:
  absl::Status Validate(const Batch& batch, const BatchPlan& plan, const ParamRefs& params,
                        const GradRefs* grads) const;
  // Binds step_ for the batch; grads == nullptr for Predict.
  absl::Status Stage(const Batch& batch, const BatchPlan& plan, const ParamRefs& params,
                     const GradRefs* grads);
  absl::Status StageOnDevice(const Batch& batch, const BatchPlan& plan, const ParamRefs& params,
                             const GradRefs* grads);
  absl::Status StageInputsOnDevice(const Batch& batch, const BatchPlan& plan, bool with_labels);
  // step_.bags: index_of(sparse position) and offsets_of(field) give where
  // the plan's indices and the batch's offsets live on the device.
  template <class IndexOf, class OffsetsOf>
  void BindBags(const Batch& batch, IndexOf index_of, OffsetsOf offsets_of);
  absl::Status ZeroSparseGrads();
  // True when the step's loss is the single BCE head the devices compute.
  bool OneBceHead() const { return heads_.size() == 1 && !heads_[0].regression; }
  // The heads' losses of rows [begin, begin + n) of `batch` from their
  // logits ([n x heads]); writes dL/dlogits and adds to out's sums.
  // Returns the chunk's weighted loss. Host memory only.
  double HeadLosses(const Batch& batch, int begin, nn::ConstMatrixView logits,
                    nn::MatrixView dlogits, StepOutput* out) const;
  // The same for logits in device memory: the [n x heads] logits come to
  // the host (small), the losses are computed there, dL/dlogits go back.
  absl::StatusOr<double> DeviceHeadLosses(const Batch& batch, int begin,
                                          nn::ConstMatrixView logits, nn::MatrixView dlogits,
                                          StepOutput* out);
  // The heads' outputs of [rows x heads] logits (device memory) into probs:
  // a probability, or a regression head's value.
  absl::Status HeadOutputs(nn::ConstMatrixView logits, float* probs);
  // [rows x heads] host logits to the heads' outputs in place (a
  // conditioned head's is its probability times the head it names).
  void HeadProbabilities(std::span<float> values) const;
  // chunk_ = rows [begin, begin + rows) of step_.
  void SliceStep(int begin, int rows);
  absl::Status ExportGrads(const GradRefs& grads);
  size_t TableFloats(uint32_t table, const BatchPlan& plan) const;
  // Derives sparse_pos_ and plan_source_ once the subclass declared its tables.
  void IndexTables() const;

  ModelOptions options_;
  std::vector<ModelHead> heads_ = {ModelHead{}};
  std::unique_ptr<nn::Device> device_;
  TableRegistry registry_;
  mutable std::vector<int> sparse_pos_;    // by table id: BatchPlan position or -1
  mutable std::vector<int> plan_source_;   // by sparse position: same fields as, or -1
  mutable IdDeduper dedup_;
  // Wraps the caller's GradRefs::on_ready: reports each dense table once.
  void ReportReady(uint32_t table);
  std::vector<char> reported_;  // by table id, this step
  const GradRefs* reporting_ = nullptr;
  std::function<void(uint32_t)> ready_fn_;

  StepData step_;   // the whole batch
  StepData chunk_;  // the rows being computed
  int chunk_rows_ = 0;
  uint64_t train_steps_ = 0;  // TrainStep calls so far: a new dropout draw each
  nn::DeviceBuffer logits_, dlogits_;

  // Staging for devices without host memory.
  std::vector<size_t> table_offset_;       // floats into dev_params_/dev_grads_, by table id
  std::vector<size_t> index_offset_;       // plan index of each sparse position in host_u32_
  nn::AlignedBuffer<uint32_t> host_u32_;
  nn::AlignedBuffer<float> host_f32_;
  nn::AlignedBuffer<float> host_grads_;
  nn::AlignedBuffer<float> host_logits_;  // several heads on a device: logits, dlogits
  nn::DeviceBuffer dev_u32_, dev_f32_, dev_params_, dev_grads_;
};

}  // namespace pstrain::worker
