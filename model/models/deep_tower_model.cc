#include "model/models/deep_tower_model.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/model_base.h"

namespace pstrain::worker {
namespace {

// U(-sqrt(6 / fan_in), sqrt(6 / fan_in)) (He et al. 2015): Var = 2 / fan_in,
// which keeps the activations' scale through ReLU layers.
InitializerConfig HeInit(int fan_in, uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = std::sqrt(6.0f / static_cast<float>(fan_in));
  init.seed = seed;
  return init;
}

class DeepTowerModel final : public ModelBase {
 public:
  DeepTowerModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        fields_(options.num_sparse),
        offset_(FieldOffsets(options)),
        in_(FieldOffsets(options).back() + options.num_dense) {
    std::vector<int> widths = options.deep_mlp;
    widths.push_back(1);  // the logit
    int fan_in = in_;
    for (size_t i = 0; i < widths.size(); ++i) {
      Layer l;
      l.in = fan_in;
      l.out = widths[i];
      const bool logit = i + 1 == widths.size();
      l.act = logit ? nn::Activation::kNone : nn::Activation::kRelu;
      l.weight = registry().AddDense(
          absl::StrCat("tower.", i, ".weight"), static_cast<uint64_t>(l.in) * l.out,
          logit ? LinearWeightInit(l.in, options.seed) : HeInit(l.in, options.seed));
      l.bias =
          registry().AddDense(absl::StrCat("tower.", i, ".bias"), l.out,
                              registry().BiasInit(l.in, options.seed));
      layers_.push_back(std::move(l));
      fan_in = widths[i];
    }
    for (int f = 0; f < fields_; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

 private:
  struct Layer {
    int in = 0;
    int out = 0;
    nn::Activation act = nn::Activation::kNone;
    uint32_t weight = 0;
    uint32_t bias = 0;
    nn::DeviceBuffer y, dy;  // hidden layers: output and its gradient
  };

  absl::Status Reserve(int batch) override {
    nn::Device* dev = &device();
    const size_t rows = static_cast<size_t>(batch);
    PS_RETURN_IF_ERROR(x_.ReserveElements(dev, rows * in_));
    PS_RETURN_IF_ERROR(dx_.ReserveElements(dev, rows * in_));
    for (size_t i = 0; i + 1 < layers_.size(); ++i) {
      PS_RETURN_IF_ERROR(layers_[i].y.ReserveElements(dev, rows * layers_[i].out));
      PS_RETURN_IF_ERROR(layers_[i].dy.ReserveElements(dev, rows * layers_[i].out));
    }
    return absl::OkStatus();
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    nn::MatrixView x(x_.as(), step.batch, in_);
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f),
                                                 /*accumulate=*/false, Block(x, f)));
    }
    if (step.dense.cols > 0) {
      PS_RETURN_IF_ERROR(dev.CopyMatrix(step.dense, x.Columns(offset_[fields_], step.dense.cols)));
    }
    nn::ConstMatrixView input = x;
    for (size_t i = 0; i < layers_.size(); ++i) {
      Layer& l = layers_[i];
      nn::MatrixView y =
          i + 1 == layers_.size() ? logits : nn::MatrixView(l.y.as(), step.batch, l.out);
      PS_RETURN_IF_ERROR(
          dev.LinearForward(input, step.params[l.weight], step.params[l.bias], l.act, y));
      input = y;
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits, nn::MatrixView dlogits,
                        bool accumulate) override {
    nn::Device& dev = device();
    const int rows = step.batch;
    nn::MatrixView dx(dx_.as(), rows, in_);
    for (size_t i = layers_.size(); i-- > 0;) {
      Layer& l = layers_[i];
      const bool last = i + 1 == layers_.size();
      nn::ConstMatrixView input =
          i == 0 ? nn::ConstMatrixView(x_.as(), rows, in_)
                 : nn::ConstMatrixView(layers_[i - 1].y.as(), rows, layers_[i - 1].out);
      nn::ConstMatrixView y = last ? logits : nn::ConstMatrixView(l.y.as(), rows, l.out);
      nn::MatrixView dy = last ? dlogits : nn::MatrixView(l.dy.as(), rows, l.out);
      nn::MatrixView d_input =
          i == 0 ? dx : nn::MatrixView(layers_[i - 1].dy.as(), rows, layers_[i - 1].out);
      PS_RETURN_IF_ERROR(dev.LinearBackward(input, step.params[l.weight], y, l.act, dy,
                                            step.grads[l.weight], step.grads[l.bias], d_input,
                                            accumulate));
      if (step.grad_ready != nullptr) {
        (*step.grad_ready)(l.weight);
        (*step.grad_ready)(l.bias);
      }
    }
    const auto& sparse = sparse_tables();
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(Block(dx, f), step.Bag(f),
                                                  FieldPooling(f), step.grads[sparse[f]]));
    }
    return absl::OkStatus();
  }

  const int fields_;
  // Field f's embedding block of the tower's input x = [emb_1 | ... | emb_F | dense].
  nn::MatrixView Block(nn::MatrixView x, int f) const {
    return x.Columns(offset_[f], offset_[f + 1] - offset_[f]);
  }

  const std::vector<int> offset_;  // FieldOffsets(): each field's block of x
  const int in_;
  std::vector<Layer> layers_;
  nn::DeviceBuffer x_, dx_;
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
  return std::unique_ptr<Model>(new DeepTowerModel(options, std::move(device)));
}

}  // namespace pstrain::worker
