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

absl::StatusOr<uint32_t> FindTable(const Model& model, const std::string& name) {
  for (const TableSpec& t : model.tables()) {
    if (t.name == name) return t.id;
  }
  return absl::NotFoundError(absl::StrCat("the model has no table ", name));
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
