#include "model/models/dcn_v2_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/cross_net.h"
#include "model/models/feature_head.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"

namespace pstrain::worker {
namespace {

// DCN-v2's head: the bottom MLP, the embeddings, and the cross layers over
// x_0 = [bottom | emb_1 | ... | emb_F].
class DcnV2Head final : public FeatureHead {
 public:
  struct Acts : HeadActivations {
    StackActivations bottom;
    nn::DeviceBuffer x0;  // [rows x width]: bottom output | embeddings
    CrossNet::Activations cross;
  };

  DcnV2Head(std::vector<LinearSpec> bottom, std::vector<uint32_t> emb, std::vector<int> offset,
            std::vector<nn::Pooling> pooling, CrossNet cross)
      : bottom_width_(bottom.back().out),
        bottom_(std::move(bottom)),
        emb_(std::move(emb)),
        offset_(std::move(offset)),
        pooling_(std::move(pooling)),
        cross_(std::move(cross)) {}

  int out_width() const override { return cross_.width(); }
  std::vector<uint32_t> dense_tables() const override {
    std::vector<uint32_t> ids = cross_.table_ids();
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
    PS_RETURN_IF_ERROR(acts->x0.ReserveElements(&dev, static_cast<size_t>(rows) * out_width()));
    nn::MatrixView x0(acts->x0.as(), rows, out_width());
    PS_RETURN_IF_ERROR(
        bottom_.Forward(dev, in.dense, params, &acts->bottom, x0.Columns(0, bottom_width_)));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], pooling_[f],
                                                 /*accumulate=*/false, Block(x0, f)));
    }
    return cross_.Forward(dev, x0, params, &acts->cross, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dx0_.ReserveElements(&dev, static_cast<size_t>(rows) * out_width()));
    nn::ConstMatrixView x0(acts.x0.as(), rows, out_width());
    nn::MatrixView dx0(dx0_.as(), rows, out_width());
    PS_RETURN_IF_ERROR(
        cross_.Backward(dev, x0, params, acts.cross, d_out, grads, dx0, accumulate, ready));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(
          dev.EmbeddingBagBackward(Block(dx0, f), in.bags[f], pooling_[f], grads[emb_[f]]));
    }
    return bottom_.Backward(dev, in.dense, params, acts.bottom, x0.Columns(0, bottom_width_),
                            dx0.Columns(0, bottom_width_), grads, nn::MatrixView(), accumulate,
                            ready);
  }

 private:
  // Field f's embedding block of x_0.
  template <class View>
  View Block(View x, size_t f) const {
    return x.Columns(bottom_width_ + offset_[f], offset_[f + 1] - offset_[f]);
  }

  const int bottom_width_;
  LayerStack bottom_;
  const std::vector<uint32_t> emb_;
  const std::vector<int> offset_;  // FieldOffsets()
  const std::vector<nn::Pooling> pooling_;
  CrossNet cross_;
  nn::DeviceBuffer dx0_;  // scratch: one backward at a time
};

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

// The width of x_0: the bottom output and every field's embedding.
int CrossWidth(const ModelOptions& options) {
  return options.bottom_mlp.back() + FieldOffsets(options).back();
}

// Declares the bottom MLP's and the cross layers' tables (they come before
// the top's) and returns `registry`.
TableRegistry* WithBottomAndCross(TableRegistry* registry, const ModelOptions& options) {
  DeclareLinearLayers(registry, "bottom", options.num_dense, options.bottom_mlp,
                      /*relu_last=*/true, options.seed);
  CrossNet(registry, "cross", CrossWidth(options), options.cross_layers, options.cross_rank,
           options.seed);
  return registry;
}

// DCN-v2 = DcnV2Head + the top MLP, the head found by its tables' names as
// pipeline mode finds it.
class DcnV2Model final : public ModelBase {
 public:
  DcnV2Model(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        top_(WithBottomAndCross(&registry(), options), "top", CrossWidth(options),
             WithLogitLayer(options.top_mlp), /*relu_last=*/false, options.seed,
             /*dropout_hidden=*/true) {
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

  absl::Status Init() {
    PS_ASSIGN_OR_RETURN(head_, CreateDcnV2Head(options(), *this));
    head_acts_ = head_->NewActivations();
    return absl::OkStatus();
  }

 private:
  int width() const { return top_.in(); }

  absl::Status Reserve(int batch) override {
    nn::Device* dev = &device();
    PS_RETURN_IF_ERROR(top_.Reserve(dev, batch));
    PS_RETURN_IF_ERROR(xl_.ReserveElements(dev, static_cast<size_t>(batch) * width()));
    PS_RETURN_IF_ERROR(dxl_.ReserveElements(dev, static_cast<size_t>(batch) * width()));
    return absl::OkStatus();
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    nn::MatrixView xl(xl_.as(), step.batch, width());
    BindHeadInputs(step, &head_in_);
    PS_RETURN_IF_ERROR(head_->Forward(dev, head_in_, step.params, head_acts_.get(), xl));
    return top_.Forward(dev, xl, step.params, logits, step.dropout);
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    nn::MatrixView xl(xl_.as(), step.batch, width());
    nn::MatrixView dxl(dxl_.as(), step.batch, width());
    PS_RETURN_IF_ERROR(top_.Backward(dev, xl, step.params, logits, dlogits, step.grads, dxl,
                                     accumulate, step.grad_ready));
    BindHeadInputs(step, &head_in_);
    return head_->Backward(dev, head_in_, step.params, *head_acts_, dxl, step.grads, accumulate,
                           step.grad_ready);
  }

  Mlp top_;
  std::unique_ptr<FeatureHead> head_;
  std::unique_ptr<HeadActivations> head_acts_;
  HeadInputs head_in_;
  nn::DeviceBuffer xl_, dxl_;  // the cross layers' output: the top's input
};

}  // namespace

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDcnV2Head(const ModelOptions& options,
                                                             const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, FindEmbeddingTables(options, model));
  PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> bottom,
                      FindLinearLayers(model, "bottom", options.num_dense, options.bottom_mlp,
                                       /*relu_last=*/true));
  if (bottom.empty()) return absl::InvalidArgumentError("dcn_v2: the model has no bottom MLP");
  PS_ASSIGN_OR_RETURN(CrossNet cross,
                      CrossNet::FromTables(model.tables(), "cross", CrossWidth(options),
                                           options.cross_layers, options.cross_rank));
  std::vector<nn::Pooling> pooling;
  for (size_t f = 0; f < emb.size(); ++f) pooling.push_back(FieldPooling(options, f));
  return std::unique_ptr<FeatureHead>(new DcnV2Head(std::move(bottom), std::move(emb),
                                                    FieldOffsets(options), std::move(pooling),
                                                    std::move(cross)));
}

absl::StatusOr<std::unique_ptr<Model>> CreateDcnV2Model(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 1 || options.num_sparse < 0 || options.embedding_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dcn_v2 needs num_dense >= 1, num_sparse >= 0, embedding_dim >= 1; got ",
        options.num_dense, ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  if (options.cross_layers < 1 || options.cross_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dcn_v2 needs cross_layers >= 1 and cross_rank >= 0 (0: full rank); got ",
        options.cross_layers, " and ", options.cross_rank));
  }
  PS_RETURN_IF_ERROR(CheckWidths("bottom_mlp", options.bottom_mlp));
  if (options.bottom_mlp.empty()) {
    return absl::InvalidArgumentError("dcn_v2 needs a bottom_mlp (its output starts x_0)");
  }
  PS_RETURN_IF_ERROR(CheckWidths("top_mlp", options.top_mlp));
  auto model = std::make_unique<DcnV2Model>(options, std::move(device));
  PS_RETURN_IF_ERROR(model->Init());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace pstrain::worker
