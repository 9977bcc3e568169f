#include "model/models/deep_tower_model.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/feature_head.h"
#include "model/models/head_tower_model.h"

namespace pstrain::worker {
namespace {

// deep_tower's head: x = [emb_1 | ... | emb_F | dense features].
class ConcatHead final : public FeatureHead {
 public:
  ConcatHead(std::vector<uint32_t> emb, std::vector<int> offset, std::vector<nn::Pooling> pooling,
             int num_dense)
      : emb_(std::move(emb)),
        offset_(std::move(offset)),
        pooling_(std::move(pooling)),
        num_dense_(num_dense) {}

  int out_width() const override { return offset_.back() + num_dense_; }
  std::vector<uint32_t> dense_tables() const override { return {}; }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    return std::make_unique<HeadActivations>();
  }

  absl::Status Forward(nn::Device& dev, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations*,
                       nn::MatrixView out) override {
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], pooling_[f],
                                                 /*accumulate=*/false, Block(out, f)));
    }
    if (num_dense_ > 0) {
      PS_RETURN_IF_ERROR(dev.CopyMatrix(in.dense, out.Columns(offset_.back(), num_dense_)));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in, const std::vector<const float*>&,
                        const HeadActivations&, nn::MatrixView d_out,
                        const std::vector<float*>& grads, bool,
                        const std::function<void(uint32_t)>*) override {
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(
          dev.EmbeddingBagBackward(Block(d_out, f), in.bags[f], pooling_[f], grads[emb_[f]]));
    }
    return absl::OkStatus();
  }

 private:
  // Field f's embedding block of x.
  nn::MatrixView Block(nn::MatrixView x, size_t f) const {
    return x.Columns(offset_[f], offset_[f + 1] - offset_[f]);
  }

  const std::vector<uint32_t> emb_;
  const std::vector<int> offset_;  // FieldOffsets(): each field's block of x
  const std::vector<nn::Pooling> pooling_;
  const int num_dense_;
};

std::vector<int> TowerWidths(const ModelOptions& options) {
  std::vector<int> widths = options.deep_mlp;
  widths.push_back(1);  // the logit
  return widths;
}

int TowerInput(const ModelOptions& options) {
  return FieldOffsets(options).back() + options.num_dense;
}

// deep_tower = ConcatHead + the tower (found by its tables' names too).
class DeepTowerModel final : public HeadTowerModel {
 public:
  DeepTowerModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : HeadTowerModel(options, std::move(device)) {
    const std::vector<int> widths = TowerWidths(options);
    int fan_in = TowerInput(options);
    for (size_t i = 0; i < widths.size(); ++i) {
      const bool logit = i + 1 == widths.size();
      registry().AddDense(
          absl::StrCat("tower.", i, ".weight"), static_cast<uint64_t>(fan_in) * widths[i],
          logit ? LinearWeightInit(fan_in, options.seed) : HeInit(fan_in, options.seed));
      registry().AddDense(absl::StrCat("tower.", i, ".bias"), widths[i],
                          registry().BiasInit(fan_in, options.seed));
      fan_in = widths[i];
    }
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

  absl::Status InitTower() {
    PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> layers,
                        FindLinearLayers(*this, "tower", TowerInput(options()),
                                         TowerWidths(options()), /*relu_last=*/false));
    tower_ = std::make_unique<LayerStack>(std::move(layers));
    return Init();
  }

 private:
  int tower_in() const override { return TowerInput(options()); }
  absl::Status ReserveTower(int batch) override {
    return tower_->Reserve(&device(), batch, &tower_acts_);
  }
  absl::Status TowerForward(const StepData& step, nn::ConstMatrixView x,
                            nn::MatrixView logits) override {
    return tower_->Forward(device(), x, step.params, &tower_acts_, logits);
  }
  absl::Status TowerBackward(const StepData& step, nn::ConstMatrixView x,
                             nn::ConstMatrixView logits, nn::MatrixView dlogits,
                             nn::MatrixView dx, bool accumulate) override {
    return tower_->Backward(device(), x, step.params, tower_acts_, logits, dlogits, step.grads, dx,
                            accumulate, step.grad_ready);
  }

  std::unique_ptr<LayerStack> tower_;
  StackActivations tower_acts_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDeepTowerModel(const ModelOptions& options,
                                                            std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 0 || options.num_sparse < 0 || options.embedding_dim < 1 ||
      options.num_dense + options.num_sparse < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("deep_tower needs num_dense >= 0, num_sparse >= 0 (not "
                     "both 0), embedding_dim >= 1; got ",
                     options.num_dense, ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  PS_RETURN_IF_ERROR(CheckWidths("deep_mlp (the deep_tower layers)", options.deep_mlp));
  auto model = std::make_unique<DeepTowerModel>(options, std::move(device));
  PS_RETURN_IF_ERROR(model->InitTower());
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDeepTowerHead(const ModelOptions& options,
                                                                 const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, FindEmbeddingTables(options, model));
  std::vector<nn::Pooling> pooling;
  for (size_t f = 0; f < emb.size(); ++f) pooling.push_back(FieldPooling(options, f));
  return std::unique_ptr<FeatureHead>(new ConcatHead(std::move(emb), FieldOffsets(options),
                                                     std::move(pooling), options.num_dense));
}

}  // namespace pstrain::worker
