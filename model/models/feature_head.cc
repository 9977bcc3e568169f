#include "model/models/feature_head.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/table_registry.h"

namespace pstrain::worker {

nn::Pooling FieldPooling(const ModelOptions& options, size_t field) {
  return field < options.pooling.size() && options.pooling[field] == BagPooling::kMean
             ? nn::Pooling::kMean
             : nn::Pooling::kSum;
}

BottomAndEmbeddings::BottomAndEmbeddings(std::vector<LinearSpec> bottom, std::vector<uint32_t> emb,
                                         std::vector<int> offset, std::vector<nn::Pooling> pooling)
    : bottom_width_(bottom.back().out),
      bottom_(std::move(bottom)),
      emb_(std::move(emb)),
      offset_(std::move(offset)),
      pooling_(std::move(pooling)) {}

absl::StatusOr<nn::MatrixView> BottomAndEmbeddings::Forward(nn::Device& dev, const HeadInputs& in,
                                                            const std::vector<const float*>& params,
                                                            Activations* acts) const {
  const int rows = in.dense.rows;
  PS_RETURN_IF_ERROR(acts->x.ReserveElements(&dev, static_cast<size_t>(rows) * width()));
  nn::MatrixView x(acts->x.as(), rows, width());
  PS_RETURN_IF_ERROR(
      bottom_.Forward(dev, in.dense, params, &acts->bottom, x.Columns(0, bottom_width_)));
  for (size_t f = 0; f < emb_.size(); ++f) {
    PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(params[emb_[f]], in.bags[f], pooling_[f],
                                               /*accumulate=*/false, Block(x, f)));
  }
  return x;
}

absl::Status BottomAndEmbeddings::Backward(nn::Device& dev, const HeadInputs& in,
                                           const std::vector<const float*>& params,
                                           const Activations& acts, nn::MatrixView dx,
                                           const std::vector<float*>& grads, bool accumulate,
                                           const std::function<void(uint32_t)>* ready) {
  for (size_t f = 0; f < emb_.size(); ++f) {
    PS_RETURN_IF_ERROR(
        dev.EmbeddingBagBackward(Block(dx, f), in.bags[f], pooling_[f], grads[emb_[f]]));
  }
  nn::ConstMatrixView x(acts.x.as(), in.dense.rows, width());
  return bottom_.Backward(dev, in.dense, params, acts.bottom, x.Columns(0, bottom_width_),
                          dx.Columns(0, bottom_width_), grads, nn::MatrixView(), accumulate,
                          ready);
}

absl::StatusOr<BottomAndEmbeddings> FindBottomAndEmbeddings(const ModelOptions& options,
                                                            const Model& model) {
  PS_ASSIGN_OR_RETURN(std::vector<uint32_t> emb, FindEmbeddingTables(options, model));
  PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> bottom,
                      FindLinearLayers(model, "bottom", options.num_dense, options.bottom_mlp,
                                       /*relu_last=*/true));
  if (bottom.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, ": the model has no bottom MLP"));
  }
  std::vector<nn::Pooling> pooling;
  for (size_t f = 0; f < emb.size(); ++f) pooling.push_back(FieldPooling(options, f));
  return BottomAndEmbeddings(std::move(bottom), std::move(emb), FieldOffsets(options),
                             std::move(pooling));
}

absl::StatusOr<uint32_t> FindTable(const Model& model, const std::string& name) {
  for (const TableSpec& t : model.tables()) {
    if (t.name == name) return t.id;
  }
  return absl::NotFoundError(absl::StrCat("the model has no table ", name));
}

absl::StatusOr<std::vector<uint32_t>> FindEmbeddingTables(const ModelOptions& options,
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
    if (t.name != want || static_cast<int>(t.dim) != FieldDim(options, f)) {
      return absl::InvalidArgumentError(absl::StrCat("sparse table ", f, " is ", t.name, " (dim ",
                                                     t.dim, "), expected ", want, " of dim ",
                                                     FieldDim(options, f)));
    }
  }
  return std::vector<uint32_t>(sparse.begin(), sparse.end());
}

absl::StatusOr<std::vector<LinearSpec>> FindLinearLayers(const Model& model,
                                                         const std::string& prefix, int in,
                                                         const std::vector<int>& widths,
                                                         bool relu_last) {
  std::vector<LinearSpec> layers;
  for (size_t i = 0; i < widths.size(); ++i) {
    LinearSpec l;
    l.in = in;
    l.out = widths[i];
    l.act = i + 1 < widths.size() || relu_last ? nn::Activation::kRelu : nn::Activation::kNone;
    PS_ASSIGN_OR_RETURN(l.weight, FindTable(model, absl::StrCat(prefix, ".", i, ".weight")));
    PS_ASSIGN_OR_RETURN(l.bias, FindTable(model, absl::StrCat(prefix, ".", i, ".bias")));
    const TableSpec& w = model.tables()[l.weight];
    const TableSpec& b = model.tables()[l.bias];
    if (w.kind != TableKind::kDense || w.size != static_cast<uint64_t>(l.in) * l.out ||
        b.kind != TableKind::kDense || b.size != static_cast<uint64_t>(l.out)) {
      return absl::InvalidArgumentError(absl::StrCat("table ", w.name, " is not a ", l.out, " x ",
                                                     l.in, " layer as the options say"));
    }
    layers.push_back(l);
    in = widths[i];
  }
  return layers;
}

}  // namespace pstrain::worker
