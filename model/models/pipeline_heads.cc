// The heads pipeline mode runs on stage 0 for the networks it cuts (dlrm,
// dcn_v2, deep_tower): everything below the top tower, over the tables the
// network's graph declares, found by name. The tower itself is cut into
// stages as Linear layers (worker/pipeline/pipeline_model.h).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/cross_net.h"
#include "model/models/feature_head.h"
#include "model/models/table_registry.h"
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

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDlrmHead(const ModelOptions& options,
                                                            const Model& model) {
  PS_ASSIGN_OR_RETURN(BottomAndEmbeddings lower, FindBottomAndEmbeddings(options, model));
  if (options.bottom_mlp.back() != options.embedding_dim) {
    return absl::InvalidArgumentError("dlrm: the bottom MLP must end at embedding_dim");
  }
  return std::unique_ptr<FeatureHead>(new DlrmHead(options.embedding_dim, std::move(lower)));
}

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

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDcnV2Head(const ModelOptions& options,
                                                             const Model& model) {
  PS_ASSIGN_OR_RETURN(BottomAndEmbeddings lower, FindBottomAndEmbeddings(options, model));
  PS_ASSIGN_OR_RETURN(CrossNet cross,
                      CrossNet::FromTables(model.tables(), "cross", lower.width(),
                                           options.cross_layers, options.cross_rank));
  return std::unique_ptr<FeatureHead>(new DcnV2Head(std::move(lower), std::move(cross)));
}

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

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDeepTowerHead(const ModelOptions& options,
                                                                 const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, FindEmbeddingTables(options, model));
  std::vector<nn::Pooling> pooling;
  for (size_t f = 0; f < emb.size(); ++f) pooling.push_back(FieldPooling(options, f));
  return std::unique_ptr<FeatureHead>(new ConcatHead(std::move(emb), FieldOffsets(options),
                                                     std::move(pooling), options.num_dense));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateFeatureHead(const ModelOptions& options,
                                                               const Model& model) {
  if (options.name == "deep_tower") return CreateDeepTowerHead(options, model);
  if (options.name == "dcn_v2") return CreateDcnV2Head(options, model);
  if (options.name == "dlrm") return CreateDlrmHead(options, model);
  return absl::InvalidArgumentError(
      absl::StrCat("model '", options.name, "' is not a head and a tower"));
}

}  // namespace pstrain::worker
