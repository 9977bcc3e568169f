#include "model/models/dlrm_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/feature_head.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"
#include "model/nn/interaction.h"

namespace pstrain::worker {
namespace {

// DLRM's head: the bottom MLP over the dense features, the embeddings, and
// their dot interaction, over t = [bottom | emb_1 | ... | emb_F] per row.
class DlrmHead final : public FeatureHead {
 public:
  struct Acts : HeadActivations {
    StackActivations bottom;
    nn::DeviceBuffer t;  // [rows x vectors * dim]: bottom output | embeddings
  };

  DlrmHead(int dim, std::vector<LinearSpec> bottom, std::vector<uint32_t> emb,
           std::vector<nn::Pooling> pooling)
      : dim_(dim),
        vectors_(static_cast<int>(emb.size()) + 1),
        bottom_(std::move(bottom)),
        emb_(std::move(emb)),
        pooling_(std::move(pooling)) {}

  int out_width() const override { return nn::InteractionOutputWidth(vectors_, dim_); }
  std::vector<uint32_t> dense_tables() const override {
    std::vector<uint32_t> ids;
    for (const LinearSpec& l : bottom_.layers()) {
      ids.push_back(l.weight);
      ids.push_back(l.bias);
    }
    return ids;
  }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    return std::make_unique<Acts>();
  }

  absl::Status Forward(nn::Device& dev, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations* base,
                       nn::MatrixView out) override {
    auto* acts = static_cast<Acts*>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(acts->t.ReserveElements(&dev, static_cast<size_t>(rows) * t_width()));
    nn::MatrixView t(acts->t.as(), rows, t_width());
    PS_RETURN_IF_ERROR(bottom_.Forward(dev, in.dense, params, &acts->bottom, t.Columns(0, dim_)));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], pooling_[f],
                                                 /*accumulate=*/false, Block(t, f)));
    }
    return dev.DotInteractionForward(t, vectors_, dim_, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dt_.ReserveElements(&dev, static_cast<size_t>(rows) * t_width()));
    nn::ConstMatrixView t(acts.t.as(), rows, t_width());
    nn::MatrixView dt(dt_.as(), rows, t_width());
    PS_RETURN_IF_ERROR(dev.DotInteractionBackward(t, d_out, vectors_, dim_, dt));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(
          dev.EmbeddingBagBackward(Block(dt, f), in.bags[f], pooling_[f], grads[emb_[f]]));
    }
    return bottom_.Backward(dev, in.dense, params, acts.bottom, t.Columns(0, dim_),
                            dt.Columns(0, dim_), grads, nn::MatrixView(), accumulate, ready);
  }

 private:
  int t_width() const { return vectors_ * dim_; }
  // Field f's embedding in t.
  nn::MatrixView Block(nn::MatrixView t, size_t f) const {
    return t.Columns((static_cast<int>(f) + 1) * dim_, dim_);
  }

  const int dim_;
  const int vectors_;  // bottom output + one embedding per field
  LayerStack bottom_;
  const std::vector<uint32_t> emb_;
  const std::vector<nn::Pooling> pooling_;
  nn::DeviceBuffer dt_;  // scratch: one backward at a time
};

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

// Declares the bottom MLP's tables (they come before the top's) and
// returns `registry`.
TableRegistry* WithBottom(TableRegistry* registry, const ModelOptions& options) {
  DeclareLinearLayers(registry, "bottom", options.num_dense, options.bottom_mlp,
                      /*relu_last=*/true, options.seed);
  return registry;
}

// DLRM = DlrmHead + the top MLP, the head found by its tables' names as
// pipeline mode finds it.
class DlrmModel final : public ModelBase {
 public:
  DlrmModel(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        top_(WithBottom(&registry(), options), "top",
             nn::InteractionOutputWidth(options.num_sparse + 1, options.embedding_dim),
             WithLogitLayer(options.top_mlp), /*relu_last=*/false, options.seed,
             /*dropout_hidden=*/true) {
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)),
                           options.embedding_dim,
                           EmbeddingInit(options.embedding_dim, options.seed), {f});
    }
  }

  absl::Status Init() {
    PS_ASSIGN_OR_RETURN(head_, CreateDlrmHead(options(), *this));
    head_acts_ = head_->NewActivations();
    return absl::OkStatus();
  }

 private:
  int z_width() const { return top_.in(); }

  absl::Status Reserve(int batch) override {
    nn::Device* dev = &device();
    PS_RETURN_IF_ERROR(top_.Reserve(dev, batch));
    PS_RETURN_IF_ERROR(z_.ReserveElements(dev, static_cast<size_t>(batch) * z_width()));
    PS_RETURN_IF_ERROR(dz_.ReserveElements(dev, static_cast<size_t>(batch) * z_width()));
    return absl::OkStatus();
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    nn::MatrixView z(z_.as(), step.batch, z_width());
    BindHeadInputs(step, &head_in_);
    PS_RETURN_IF_ERROR(head_->Forward(dev, head_in_, step.params, head_acts_.get(), z));
    return top_.Forward(dev, z, step.params, logits, step.dropout);
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    nn::MatrixView z(z_.as(), step.batch, z_width());
    nn::MatrixView dz(dz_.as(), step.batch, z_width());
    PS_RETURN_IF_ERROR(top_.Backward(dev, z, step.params, logits, dlogits, step.grads, dz,
                                     accumulate, step.grad_ready));
    BindHeadInputs(step, &head_in_);
    return head_->Backward(dev, head_in_, step.params, *head_acts_, dz, step.grads, accumulate,
                           step.grad_ready);
  }

  Mlp top_;
  std::unique_ptr<FeatureHead> head_;
  std::unique_ptr<HeadActivations> head_acts_;
  HeadInputs head_in_;
  nn::DeviceBuffer z_, dz_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDlrmHead(const ModelOptions& options,
                                                            const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, FindEmbeddingTables(options, model));
  PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> bottom,
                      FindLinearLayers(model, "bottom", options.num_dense, options.bottom_mlp,
                                       /*relu_last=*/true));
  if (bottom.empty() || bottom.back().out != options.embedding_dim) {
    return absl::InvalidArgumentError("dlrm: the bottom MLP must end at embedding_dim");
  }
  std::vector<nn::Pooling> pooling;
  for (size_t f = 0; f < emb.size(); ++f) pooling.push_back(FieldPooling(options, f));
  return std::unique_ptr<FeatureHead>(new DlrmHead(options.embedding_dim, std::move(bottom),
                                                   std::move(emb), std::move(pooling)));
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
  auto model = std::make_unique<DlrmModel>(options, std::move(device));
  PS_RETURN_IF_ERROR(model->Init());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace pstrain::worker
