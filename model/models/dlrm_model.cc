#include "model/models/dlrm_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/feature_head.h"
#include "model/models/mlp.h"
#include "model/models/head_tower_model.h"
#include "model/nn/interaction.h"

namespace pstrain::worker {
namespace {

// DLRM's head: the dot interaction of t = [bottom | emb_1 | ... | emb_F].
class DlrmHead final : public FeatureHead {
 public:
  struct Acts : HeadActivations {
    BottomAndEmbeddings::Activations lower;  // t
  };

  DlrmHead(int dim, BottomAndEmbeddings lower)
      : dim_(dim), vectors_(lower.width() / dim), lower_(std::move(lower)) {}

  int out_width() const override { return nn::InteractionOutputWidth(vectors_, dim_); }
  std::vector<uint32_t> dense_tables() const override { return lower_.dense_tables(); }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    return std::make_unique<Acts>();
  }

  absl::Status Forward(nn::Device& dev, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations* base,
                       nn::MatrixView out) override {
    auto* acts = static_cast<Acts*>(base);
    PS_ASSIGN_OR_RETURN(nn::MatrixView t, lower_.Forward(dev, in, params, &acts->lower));
    return dev.DotInteractionForward(t, vectors_, dim_, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dt_.ReserveElements(&dev, static_cast<size_t>(rows) * lower_.width()));
    nn::ConstMatrixView t(acts.lower.x.as(), rows, lower_.width());
    nn::MatrixView dt(dt_.as(), rows, lower_.width());
    PS_RETURN_IF_ERROR(dev.DotInteractionBackward(t, d_out, vectors_, dim_, dt));
    return lower_.Backward(dev, in, params, acts.lower, dt, grads, accumulate, ready);
  }

 private:
  const int dim_;
  const int vectors_;  // bottom output + one embedding per field
  BottomAndEmbeddings lower_;
  nn::DeviceBuffer dt_;  // scratch: one backward at a time
};

}  // namespace

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDlrmHead(const ModelOptions& options,
                                                            const Model& model) {
  PS_ASSIGN_OR_RETURN(BottomAndEmbeddings lower, FindBottomAndEmbeddings(options, model));
  if (options.bottom_mlp.back() != options.embedding_dim) {
    return absl::InvalidArgumentError("dlrm: the bottom MLP must end at embedding_dim");
  }
  return std::unique_ptr<FeatureHead>(new DlrmHead(options.embedding_dim, std::move(lower)));
}

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
  return CreateHeadAndTopMlpModel(
      options, std::move(device),
      [&](TableRegistry* registry) {
        DeclareLinearLayers(registry, "bottom", options.num_dense, options.bottom_mlp,
                            /*relu_last=*/true, options.seed);
      },
      nn::InteractionOutputWidth(options.num_sparse + 1, options.embedding_dim));
}

}  // namespace pstrain::worker
