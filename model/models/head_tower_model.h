// HeadTowerModel: a model made of a FeatureHead and a tower over the head's
// output (dlrm, dcn_v2, deep_tower). The head is found by its tables' names
// (CreateFeatureHead), as pipeline mode finds it for its stage 0, so a
// model and its pipeline cut run one implementation; the subclass declares
// the tables and runs the tower. Not thread-safe (Model contract).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/models/feature_head.h"
#include "model/models/model_base.h"

namespace pstrain::worker {

class HeadTowerModel : public ModelBase {
 public:
  // Finds the head over this model's tables. Call once, after construction
  // (the subclass's constructor declares the tables).
  absl::Status Init();

 protected:
  using ModelBase::ModelBase;

  // The tower's input width (the head's output).
  virtual int tower_in() const = 0;
  virtual absl::Status ReserveTower(int batch) = 0;
  // logits ([B x 1]) = tower(z).
  virtual absl::Status TowerForward(const StepData& step, nn::ConstMatrixView z,
                                    nn::MatrixView logits) = 0;
  // The tower's gradients, and dL/dz into dz (dlogits may be modified).
  virtual absl::Status TowerBackward(const StepData& step, nn::ConstMatrixView z,
                                     nn::ConstMatrixView logits, nn::MatrixView dlogits,
                                     nn::MatrixView dz, bool accumulate) = 0;

 private:
  absl::Status Reserve(int batch) final;
  absl::Status Forward(const StepData& step, nn::MatrixView logits) final;
  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits, nn::MatrixView dlogits,
                        bool accumulate) final;

  std::unique_ptr<FeatureHead> head_;
  std::unique_ptr<HeadActivations> head_acts_;
  HeadInputs head_in_;
  nn::DeviceBuffer z_, dz_;  // the head's output (the tower's input) and its gradient
};

// A head and a top MLP over its `head_width` columns (ReLU after every
// layer but the 1-wide logit, the step's dropout on its hidden layers), as
// dlrm and dcn_v2 are: `declare_head` declares the head's dense tables
// (they come first), then the top's ("top.<i>") and one embedding table per
// sparse field ("emb.<name>", FieldDim wide) are declared, and the head is
// found by name (CreateFeatureHead).
absl::StatusOr<std::unique_ptr<Model>> CreateHeadAndTopMlpModel(
    const ModelOptions& options, std::unique_ptr<nn::Device> device,
    const std::function<void(TableRegistry*)>& declare_head, int head_width);

}  // namespace pstrain::worker
