#include "model/models/dcn_v2_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/cross_net.h"
#include "model/models/feature_head.h"
#include "model/models/mlp.h"
#include "model/models/head_tower_model.h"

namespace pstrain::worker {
namespace {

// DCN-v2's head: the cross layers over x_0 = [bottom | emb_1 | ... | emb_F].
class DcnV2Head final : public FeatureHead {
 public:
  struct Acts : HeadActivations {
    BottomAndEmbeddings::Activations lower;  // x_0
    CrossNet::Activations cross;
  };

  DcnV2Head(BottomAndEmbeddings lower, CrossNet cross)
      : lower_(std::move(lower)), cross_(std::move(cross)) {}

  int out_width() const override { return cross_.width(); }
  std::vector<uint32_t> dense_tables() const override {
    std::vector<uint32_t> ids = cross_.table_ids();
    for (uint32_t id : lower_.dense_tables()) ids.push_back(id);
    return ids;
  }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    return std::make_unique<Acts>();
  }

  absl::Status Forward(nn::Device& dev, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations* base,
                       nn::MatrixView out) override {
    auto* acts = static_cast<Acts*>(base);
    PS_ASSIGN_OR_RETURN(nn::MatrixView x0, lower_.Forward(dev, in, params, &acts->lower));
    return cross_.Forward(dev, x0, params, &acts->cross, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dx0_.ReserveElements(&dev, static_cast<size_t>(rows) * out_width()));
    nn::ConstMatrixView x0(acts.lower.x.as(), rows, out_width());
    nn::MatrixView dx0(dx0_.as(), rows, out_width());
    PS_RETURN_IF_ERROR(
        cross_.Backward(dev, x0, params, acts.cross, d_out, grads, dx0, accumulate, ready));
    return lower_.Backward(dev, in, params, acts.lower, dx0, grads, accumulate, ready);
  }

 private:
  BottomAndEmbeddings lower_;
  CrossNet cross_;
  nn::DeviceBuffer dx0_;  // scratch: one backward at a time
};

// The width of x_0: the bottom output and every field's embedding.
int CrossWidth(const ModelOptions& options) {
  return options.bottom_mlp.back() + FieldOffsets(options).back();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDcnV2Head(const ModelOptions& options,
                                                             const Model& model) {
  PS_ASSIGN_OR_RETURN(BottomAndEmbeddings lower, FindBottomAndEmbeddings(options, model));
  PS_ASSIGN_OR_RETURN(CrossNet cross,
                      CrossNet::FromTables(model.tables(), "cross", lower.width(),
                                           options.cross_layers, options.cross_rank));
  return std::unique_ptr<FeatureHead>(new DcnV2Head(std::move(lower), std::move(cross)));
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
  return CreateHeadAndTopMlpModel(
      options, std::move(device),
      [&](TableRegistry* registry) {
        DeclareLinearLayers(registry, "bottom", options.num_dense, options.bottom_mlp,
                            /*relu_last=*/true, options.seed);
        CrossNet(registry, "cross", CrossWidth(options), options.cross_layers, options.cross_rank,
                 options.seed);
      },
      CrossWidth(options));
}

}  // namespace pstrain::worker
