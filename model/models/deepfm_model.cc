#include "model/models/deepfm_model.h"

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

// U(-0.01, 0.01): the FM's logit starts near zero. At nn.Linear-like scales
// (1/sqrt(dim)) the sum of 325 pairwise products of 26 fields starts as noise
// of standard deviation ~1.5 that one pass does not unlearn (eval AUC 0.60
// against 0.71 at 0.01 on 200k generated rows; 0.05: 0.66 at lr 0.05).
InitializerConfig FmEmbeddingInit(uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = 0.01f;
  init.seed = seed;
  return init;
}

class DeepFmModel final : public ModelBase {
 public:
  DeepFmModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        fields_(options.num_sparse),
        dim_(options.embedding_dim),
        deep_(&registry(), "deep", fields_ * dim_ + options.num_dense,
              WithLogitLayer(options.deep_mlp), /*relu_last=*/false, options.seed,
              /*dropout_hidden=*/true) {
    // Sparse positions: wide.C1..C<n> first, then emb.C1..C<n> (as wide_deep).
    for (int f = 0; f < fields_; ++f) {
      registry().AddSparse(absl::StrCat("wide.", SparseFieldName(options, f)), 1, ZeroInit(options.seed),
                           {f});
    }
    for (int f = 0; f < fields_; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), dim_,
                           FmEmbeddingInit(options.seed), {f});
    }
  }

 private:
  absl::Status Reserve(int batch) override {
    PS_RETURN_IF_ERROR(deep_.Reserve(&device(), batch));
    const size_t n = static_cast<size_t>(batch) * deep_.in();
    PS_RETURN_IF_ERROR(x_.ReserveElements(&device(), n));
    PS_RETURN_IF_ERROR(dx_.ReserveElements(&device(), n));
    return dfm_.ReserveElements(&device(), batch);
  }

  // The embeddings' block [emb_1 | ... | emb_F] of x (the FM's input).
  nn::MatrixView Embeddings(nn::MatrixView x) const { return x.Columns(0, fields_ * dim_); }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    nn::MatrixView x(x_.as(), step.batch, deep_.in());
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[fields_ + f]],
                                                 step.Bag(fields_ + f), FieldPooling(f),
                                                 /*accumulate=*/false, x.Columns(f * dim_, dim_)));
    }
    if (step.dense.cols > 0) {
      PS_RETURN_IF_ERROR(dev.CopyMatrix(step.dense, x.Columns(fields_ * dim_, step.dense.cols)));
    }
    PS_RETURN_IF_ERROR(deep_.Forward(dev, x, step.params, logits, step.dropout));
    PS_RETURN_IF_ERROR(dev.FmForward(Embeddings(x), fields_, dim_,
                                     /*accumulate=*/true, logits));
    for (int f = 0; f < fields_; ++f) {  // first order: each field's weight sum
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f),
                                                 /*accumulate=*/true, logits));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits, nn::MatrixView dlogits,
                        bool accumulate) override {
    nn::Device& dev = device();
    const auto& sparse = sparse_tables();
    // The deep tower's backward may modify dlogits: keep a copy for the FM.
    nn::MatrixView dfm(dfm_.as(), step.batch, 1);
    PS_RETURN_IF_ERROR(dev.CopyMatrix(dlogits, dfm));
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(
          dev.EmbeddingBagBackward(dlogits, step.Bag(f), FieldPooling(f), step.grads[sparse[f]]));
    }
    nn::MatrixView x(x_.as(), step.batch, deep_.in());
    nn::MatrixView dx(dx_.as(), step.batch, deep_.in());
    PS_RETURN_IF_ERROR(deep_.Backward(dev, x, step.params, logits, dlogits, step.grads, dx,
                                      accumulate, step.grad_ready));
    PS_RETURN_IF_ERROR(dev.FmBackward(Embeddings(x), dfm, fields_, dim_,
                                      /*accumulate=*/true, Embeddings(dx)));
    for (int f = 0; f < fields_; ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(dx.Columns(f * dim_, dim_), step.Bag(fields_ + f),
                                                  FieldPooling(f),
                                                  step.grads[sparse[fields_ + f]]));
    }
    return absl::OkStatus();
  }

  const int fields_;
  const int dim_;
  Mlp deep_;
  nn::DeviceBuffer x_, dx_, dfm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDeepFmModel(const ModelOptions& options,
                                                         std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 0 || options.num_sparse < 0 || options.embedding_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("deepfm needs num_dense >= 0, num_sparse >= 0, "
                     "embedding_dim >= 1; got ",
                     options.num_dense, ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  for (int f = 0; f < options.num_sparse; ++f) {
    if (FieldDim(options, f) != options.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "deepfm: its factorization machine needs every embedding "
          "embedding_dim (",
          options.embedding_dim, ") wide, field ", SparseFieldName(f), " is ", FieldDim(options, f),
          " (wide_deep, deep_tower and dcn_v2 take per-field widths)"));
    }
  }
  PS_RETURN_IF_ERROR(CheckWidths("deep_mlp", options.deep_mlp));
  return std::unique_ptr<Model>(new DeepFmModel(options, std::move(device)));
}

}  // namespace pstrain::worker
