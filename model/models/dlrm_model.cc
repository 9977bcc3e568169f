#include "model/models/dlrm_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"
#include "model/nn/interaction.h"

namespace pstrain::worker {
namespace {

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

class DlrmModel final : public ModelBase {
 public:
  DlrmModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        dim_(options.embedding_dim),
        vectors_(options.num_sparse + 1),
        bottom_(&registry(), "bottom", options.num_dense, options.bottom_mlp,
                /*relu_last=*/true, options.seed),
        top_(&registry(), "top", nn::InteractionOutputWidth(vectors_, dim_),
             WithLogitLayer(options.top_mlp), /*relu_last=*/false, options.seed,
             /*dropout_hidden=*/true) {
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), dim_,
                           EmbeddingInit(dim_, options.seed), {f});
    }
  }

 private:
  // t = [bottom | emb_1 | ... | emb_F] per row: the interaction's input,
  // written in place by the bottom MLP and the embedding bags.
  int t_width() const { return vectors_ * dim_; }
  int z_width() const { return top_.in(); }

  absl::Status Reserve(int batch) override {
    nn::Device* dev = &device();
    PS_RETURN_IF_ERROR(bottom_.Reserve(dev, batch));
    PS_RETURN_IF_ERROR(top_.Reserve(dev, batch));
    PS_RETURN_IF_ERROR(t_.ReserveElements(dev, static_cast<size_t>(batch) * t_width()));
    PS_RETURN_IF_ERROR(dt_.ReserveElements(dev, static_cast<size_t>(batch) * t_width()));
    PS_RETURN_IF_ERROR(z_.ReserveElements(dev, static_cast<size_t>(batch) * z_width()));
    PS_RETURN_IF_ERROR(dz_.ReserveElements(dev, static_cast<size_t>(batch) * z_width()));
    return absl::OkStatus();
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    const int rows = step.batch;
    nn::MatrixView t(t_.as(), rows, t_width());
    nn::MatrixView z(z_.as(), rows, z_width());
    PS_RETURN_IF_ERROR(bottom_.Forward(dev, step.dense, step.params, t.Columns(0, dim_)));
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f), /*accumulate=*/false,
                                                 t.Columns((f + 1) * dim_, dim_)));
    }
    PS_RETURN_IF_ERROR(dev.DotInteractionForward(t, vectors_, dim_, z));
    return top_.Forward(dev, z, step.params, logits, step.dropout);
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    const int rows = step.batch;
    nn::MatrixView t(t_.as(), rows, t_width());
    nn::MatrixView z(z_.as(), rows, z_width());
    nn::MatrixView dt(dt_.as(), rows, t_width());
    nn::MatrixView dz(dz_.as(), rows, z_width());
    PS_RETURN_IF_ERROR(top_.Backward(dev, z, step.params, logits, dlogits, step.grads, dz,
                                     accumulate, step.grad_ready));
    PS_RETURN_IF_ERROR(dev.DotInteractionBackward(t, dz, vectors_, dim_, dt));
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(dt.Columns((f + 1) * dim_, dim_), step.Bag(f),
                                                  FieldPooling(f), step.grads[sparse[f]]));
    }
    return bottom_.Backward(dev, step.dense, step.params, t.Columns(0, dim_),
                            dt.Columns(0, dim_), step.grads, nn::MatrixView(), accumulate,
                            step.grad_ready);
  }

  const int dim_;
  const int vectors_;  // bottom output + one embedding per field
  Mlp bottom_;
  Mlp top_;
  nn::DeviceBuffer t_, dt_, z_, dz_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDlrmModel(const ModelOptions& options,
                                                       std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 1 || options.num_sparse < 0 || options.embedding_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm needs num_dense >= 1, num_sparse >= 0, embedding_dim >= 1; got ", options.num_dense,
        ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  for (int f = 0; f < options.num_sparse; ++f) {
    if (FieldDim(options, f) != options.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dlrm: its dot interaction needs every embedding embedding_dim (",
          options.embedding_dim, ") wide, field ", SparseFieldName(f), " is ",
          FieldDim(options, f), " (wide_deep and deep_tower take per-field widths)"));
    }
  }
  if (options.bottom_mlp.empty() || options.bottom_mlp.back() != options.embedding_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm: the last bottom_mlp width must equal embedding_dim (", options.embedding_dim, ")"));
  }
  PS_RETURN_IF_ERROR(CheckWidths("bottom_mlp", options.bottom_mlp));
  PS_RETURN_IF_ERROR(CheckWidths("top_mlp", options.top_mlp));
  return std::unique_ptr<Model>(new DlrmModel(options, std::move(device)));
}

}  // namespace pstrain::worker
