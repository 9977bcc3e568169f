#include "model/models/lr_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/model_base.h"

namespace pstrain::worker {
namespace {

class LrModel final : public ModelBase {
 public:
  LrModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)) {
    if (options.num_dense > 0) {
      dense_weight_ = static_cast<int>(
          registry().AddDense("lr.dense.weight", options.num_dense, ZeroInit(options.seed)));
    }
    bias_ = registry().AddDense("lr.bias", 1, ZeroInit(options.seed));
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("lr.", SparseFieldName(options, f)), 1, ZeroInit(options.seed),
                           {f});
    }
  }

 private:
  absl::Status Reserve(int batch) override { return absl::OkStatus(); }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    // With no dense features x has no columns and the layer yields the bias.
    const float* w = dense_weight_ >= 0 ? step.params[dense_weight_] : nullptr;
    PS_RETURN_IF_ERROR(
        dev.LinearForward(step.dense, w, step.params[bias_], nn::Activation::kNone, logits));
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f), /*accumulate=*/true, logits));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(dlogits, step.Bag(f), FieldPooling(f),
                                                  step.grads[sparse[f]]));
    }
    const float* w = dense_weight_ >= 0 ? step.params[dense_weight_] : nullptr;
    float* dw = dense_weight_ >= 0 ? step.grads[dense_weight_] : nullptr;
    return dev.LinearBackward(step.dense, w, logits, nn::Activation::kNone, dlogits, dw,
                              step.grads[bias_], nn::MatrixView(), accumulate);
  }

  int dense_weight_ = -1;  // table id, -1 without dense features
  uint32_t bias_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateLrModel(const ModelOptions& options,
                                                     std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 0 || options.num_sparse < 0) {
    return absl::InvalidArgumentError(absl::StrCat("lr needs num_dense >= 0, num_sparse >= 0; got ",
                                                   options.num_dense, ", ", options.num_sparse));
  }
  return std::unique_ptr<Model>(new LrModel(options, std::move(device)));
}

}  // namespace pstrain::worker
