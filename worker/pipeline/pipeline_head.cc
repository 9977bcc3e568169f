#include "worker/pipeline/pipeline_head.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/cross_net.h"
#include "model/models/table_registry.h"
#include "model/nn/interaction.h"
#include "worker/pipeline/layer_stack.h"
#include "worker/pipeline/pipeline_model.h"

namespace pstrain::worker {
namespace {

// The embedding table of each sparse field: "emb.<its name>" at sparse position f.
absl::StatusOr<std::vector<uint32_t>> EmbeddingTables(const ModelOptions& options,
                                                      const Model& model) {
  const auto& sparse = model.sparse_tables();
  if (static_cast<int>(sparse.size()) != options.num_sparse) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", sparse.size(),
                                                   " sparse tables for ", options.num_sparse,
                                                   " sparse fields"));
  }
  for (int f = 0; f < options.num_sparse; ++f) {
    const TableSpec& t = model.tables()[sparse[f]];
    const std::string want = absl::StrCat("emb.", SparseFieldName(options, f));
    if (t.name != want || static_cast<int>(t.dim) != options.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat("sparse table ", f, " is ", t.name, " (dim ",
                                                     t.dim, "), expected ", want, " of dim ",
                                                     options.embedding_dim));
    }
  }
  return std::vector<uint32_t>(sparse.begin(), sparse.end());
}

// deep_tower: [emb_1 | ... | emb_F | dense features].
class ConcatHead final : public PipelineHead {
 public:
  ConcatHead(int dim, int num_dense, std::vector<uint32_t> emb)
      : dim_(dim), num_dense_(num_dense), emb_(std::move(emb)) {}

  int out_width() const override { return static_cast<int>(emb_.size()) * dim_ + num_dense_; }
  std::vector<uint32_t> dense_tables() const override { return {}; }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    return std::make_unique<HeadActivations>();
  }

  absl::Status Forward(nn::Device& dev, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations*,
                       nn::MatrixView out) override {
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], nn::Pooling::kSum,
                                                 /*accumulate=*/false,
                                                 out.Columns(static_cast<int>(f) * dim_, dim_)));
    }
    if (num_dense_ > 0) {
      PS_RETURN_IF_ERROR(
          dev.CopyMatrix(in.dense, out.Columns(static_cast<int>(emb_.size()) * dim_, num_dense_)));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in, const std::vector<const float*>&,
                        const HeadActivations&, nn::MatrixView d_out,
                        const std::vector<float*>& grads, bool) override {
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(d_out.Columns(static_cast<int>(f) * dim_, dim_),
                                                  in.bags[f], nn::Pooling::kSum, grads[emb_[f]]));
    }
    return absl::OkStatus();
  }

 private:
  const int dim_;
  const int num_dense_;
  const std::vector<uint32_t> emb_;
};

// DLRM: bottom MLP over the dense features, embeddings, dot interaction.
class DlrmHead final : public PipelineHead {
 public:
  struct Acts : HeadActivations {
    StackActivations bottom;
    nn::DeviceBuffer t;  // [rows x vectors * dim]: bottom output | embeddings
  };

  DlrmHead(int dim, std::vector<LinearSpec> bottom, std::vector<uint32_t> emb)
      : dim_(dim),
        vectors_(static_cast<int>(emb.size()) + 1),
        bottom_(std::move(bottom)),
        emb_(std::move(emb)) {}

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
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(
          params[emb_[f]], in.bags[f], nn::Pooling::kSum, /*accumulate=*/false,
          t.Columns((static_cast<int>(f) + 1) * dim_, dim_)));
    }
    return dev.DotInteractionForward(t, vectors_, dim_, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads,
                        bool accumulate) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dt_.ReserveElements(&dev, static_cast<size_t>(rows) * t_width()));
    nn::ConstMatrixView t(acts.t.as(), rows, t_width());
    nn::MatrixView dt(dt_.as(), rows, t_width());
    PS_RETURN_IF_ERROR(dev.DotInteractionBackward(t, d_out, vectors_, dim_, dt));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(
          dev.EmbeddingBagBackward(dt.Columns((static_cast<int>(f) + 1) * dim_, dim_), in.bags[f],
                                   nn::Pooling::kSum, grads[emb_[f]]));
    }
    return bottom_.Backward(dev, in.dense, params, acts.bottom, t.Columns(0, dim_),
                            dt.Columns(0, dim_), grads, nn::MatrixView(), accumulate);
  }

 private:
  int t_width() const { return vectors_ * dim_; }

  const int dim_;
  const int vectors_;
  LayerStack bottom_;
  const std::vector<uint32_t> emb_;
  nn::DeviceBuffer dt_;  // scratch: one backward at a time
};

// DLRM-DCNv2: bottom MLP, embeddings, cross layers over [bottom | embeddings].
class DcnV2Head final : public PipelineHead {
 public:
  struct Acts : HeadActivations {
    StackActivations bottom;
    nn::DeviceBuffer x0;  // [rows x width]: bottom output | embeddings
    CrossNet::Activations cross;
  };

  DcnV2Head(int dim, std::vector<LinearSpec> bottom, std::vector<uint32_t> emb, CrossNet cross)
      : dim_(dim),
        bottom_width_(bottom.back().out),
        bottom_(std::move(bottom)),
        emb_(std::move(emb)),
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
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], nn::Pooling::kSum,
                                                 /*accumulate=*/false, Block(x0, f)));
    }
    return cross_.Forward(dev, x0, params, &acts->cross, out);
  }

  absl::Status Backward(nn::Device& dev, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& base,
                        nn::MatrixView d_out, const std::vector<float*>& grads,
                        bool accumulate) override {
    const auto& acts = static_cast<const Acts&>(base);
    const int rows = in.dense.rows;
    PS_RETURN_IF_ERROR(dx0_.ReserveElements(&dev, static_cast<size_t>(rows) * out_width()));
    nn::ConstMatrixView x0(acts.x0.as(), rows, out_width());
    nn::MatrixView dx0(dx0_.as(), rows, out_width());
    PS_RETURN_IF_ERROR(
        cross_.Backward(dev, x0, params, acts.cross, d_out, grads, dx0, accumulate));
    for (size_t f = 0; f < emb_.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(Block(dx0, f), in.bags[f], nn::Pooling::kSum,
                                                  grads[emb_[f]]));
    }
    return bottom_.Backward(dev, in.dense, params, acts.bottom, x0.Columns(0, bottom_width_),
                            dx0.Columns(0, bottom_width_), grads, nn::MatrixView(), accumulate);
  }

 private:
  template <class View>
  View Block(View x, size_t f) const {
    return x.Columns(bottom_width_ + static_cast<int>(f) * dim_, dim_);
  }

  const int dim_;
  const int bottom_width_;
  LayerStack bottom_;
  const std::vector<uint32_t> emb_;
  CrossNet cross_;
  nn::DeviceBuffer dx0_;  // scratch: one backward at a time
};

// The bottom MLP of dlrm and dcn_v2: "bottom.<i>.weight/bias", ReLU after each.
absl::StatusOr<std::vector<LinearSpec>> BottomLayers(const ModelOptions& options,
                                                     const Model& model) {
  std::vector<LinearSpec> bottom;
  int in = options.num_dense;
  for (size_t i = 0; i < options.bottom_mlp.size(); ++i) {
    LinearSpec l;
    l.in = in;
    l.out = options.bottom_mlp[i];
    l.act = nn::Activation::kRelu;
    PS_ASSIGN_OR_RETURN(l.weight, FindTable(model, absl::StrCat("bottom.", i, ".weight")));
    PS_ASSIGN_OR_RETURN(l.bias, FindTable(model, absl::StrCat("bottom.", i, ".bias")));
    bottom.push_back(l);
    in = l.out;
  }
  if (bottom.empty()) return absl::InvalidArgumentError("the model has no bottom MLP");
  return bottom;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineHead>> CreatePipelineHead(const ModelOptions& options,
                                                                 const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, EmbeddingTables(options, model));
  if (options.name == "deep_tower") {
    return std::unique_ptr<PipelineHead>(
        new ConcatHead(options.embedding_dim, options.num_dense, std::move(emb)));
  }
  if (options.name == "dcn_v2") {
    PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> bottom, BottomLayers(options, model));
    const int width = bottom.back().out + options.num_sparse * options.embedding_dim;
    PS_ASSIGN_OR_RETURN(CrossNet cross, CrossNet::FromTables(model.tables(), "cross", width,
                                                             options.cross_layers,
                                                             options.cross_rank));
    return std::unique_ptr<PipelineHead>(new DcnV2Head(options.embedding_dim, std::move(bottom),
                                                       std::move(emb), std::move(cross)));
  }
  if (options.name == "dlrm") {
    PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> bottom, BottomLayers(options, model));
    if (bottom.back().out != options.embedding_dim) {
      return absl::InvalidArgumentError("dlrm: the bottom MLP must end at embedding_dim");
    }
    return std::unique_ptr<PipelineHead>(
        new DlrmHead(options.embedding_dim, std::move(bottom), std::move(emb)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline mode has no head for model '", options.name, "'"));
}

}  // namespace pstrain::worker
