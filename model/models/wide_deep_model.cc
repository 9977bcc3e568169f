#include "model/models/wide_deep_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"

namespace pstrain::worker {
namespace {

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

class WideDeepModel final : public ModelBase {
 public:
  WideDeepModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        fields_(options.num_sparse),
        offset_(FieldOffsets(options)),
        deep_(&registry(), "deep", FieldOffsets(options).back() + options.num_dense,
              WithLogitLayer(options.deep_mlp), /*relu_last=*/false, options.seed,
              /*dropout_hidden=*/true) {
    // Sparse positions: wide.C1..C<n> first, then emb.C1..C<n>; Plan()
    // dedups each field once and copies it for the second table.
    for (int f = 0; f < fields_; ++f) {
      registry().AddSparse(absl::StrCat("wide.", SparseFieldName(options, f)), 1, ZeroInit(options.seed),
                           {f});
    }
    for (int f = 0; f < fields_; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

 private:
  absl::Status Reserve(int batch) override {
    PS_RETURN_IF_ERROR(deep_.Reserve(&device(), batch));
    const size_t n = static_cast<size_t>(batch) * deep_.in();
    PS_RETURN_IF_ERROR(x_.ReserveElements(&device(), n));
    return dx_.ReserveElements(&device(), n);
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    nn::MatrixView x(x_.as(), step.batch, deep_.in());
    // x = [emb_1 | ... | emb_F | dense]: each producer writes its own block.
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[fields_ + f]],
                                                 step.Bag(fields_ + f), FieldPooling(f),
                                                 /*accumulate=*/false, Block(x, f)));
    }
    if (step.dense.cols > 0) {
      PS_RETURN_IF_ERROR(dev.CopyMatrix(step.dense, x.Columns(offset_[fields_], step.dense.cols)));
    }
    PS_RETURN_IF_ERROR(deep_.Forward(dev, x, step.params, logits, step.dropout));
    for (int f = 0; f < fields_; ++f) {  // wide: add each field's weight sum
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f), /*accumulate=*/true, logits));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(dlogits, step.Bag(f), FieldPooling(f),
                                                  step.grads[sparse[f]]));
    }
    nn::MatrixView x(x_.as(), step.batch, deep_.in());
    nn::MatrixView dx(dx_.as(), step.batch, deep_.in());
    PS_RETURN_IF_ERROR(deep_.Backward(dev, x, step.params, logits, dlogits, step.grads, dx,
                                      accumulate, step.grad_ready));
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(Block(dx, f),
                                                  step.Bag(fields_ + f), FieldPooling(f),
                                                  step.grads[sparse[fields_ + f]]));
    }
    return absl::OkStatus();
  }

  const int fields_;
  // Field f's embedding block of the tower's input x = [emb_1 | ... | emb_F | dense].
  nn::MatrixView Block(nn::MatrixView x, int f) const {
    return x.Columns(offset_[f], offset_[f + 1] - offset_[f]);
  }

  const std::vector<int> offset_;  // FieldOffsets(): each field's block of x
  Mlp deep_;
  nn::DeviceBuffer x_, dx_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateWideDeepModel(const ModelOptions& options,
                                                           std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 0 || options.num_sparse < 0 || options.embedding_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wide_deep needs num_dense >= 0, num_sparse >= 0, embedding_dim >= 1; got ",
        options.num_dense, ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  PS_RETURN_IF_ERROR(CheckWidths("deep_mlp", options.deep_mlp));
  return std::unique_ptr<Model>(new WideDeepModel(options, std::move(device)));
}

}  // namespace pstrain::worker
