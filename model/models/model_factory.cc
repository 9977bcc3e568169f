// CreateModel(): picks the device and builds the options' network: a model
// file's graph, or the built-in network of that name (BuiltInGraph).
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/graph/graph_model.h"
#include "model/models/built_in_graphs.h"
#include "model/models/model.h"
#include "model/models/table_registry.h"
#include "model/nn/blas.h"
#include "model/nn/device.h"

namespace pstrain::worker {

absl::Status CheckModelName(const std::string& name) {
  if (name == "lr" || name == "wide_deep" || name == "dlrm" || name == "deep_tower" ||
      name == "dcn_v2" || name == "deepfm") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name, "' (expected lr, wide_deep, dlrm, deep_tower, dcn_v2 or deepfm)"));
}

absl::Status CheckDropout(const std::string& model, float rate) {
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("dropout must be in [0, 1), not ", rate));
  }
  if (rate > 0.0f && (model == "lr" || model == "deep_tower")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dropout is not built for model ", model,
        " (it applies to the towers of dlrm, dcn_v2, wide_deep and deepfm)"));
  }
  return absl::OkStatus();
}

void SetSchemaColumns(const Schema& schema, ModelOptions* m) {
  m->num_dense = schema.num_dense;
  m->num_sparse = schema.num_sparse;
  m->pooling.clear();
  m->field_dims.clear();
  m->field_names.clear();
  m->field_ids_of.clear();
  m->field_rows.clear();
  m->label_names = LabelNames(schema);
  for (int f = 0; f < schema.num_sparse; ++f) m->field_rows.push_back(FieldBuckets(schema, f));
  for (const SparseColumn& c : schema.sparse) {
    m->pooling.push_back(c.pooling);
    m->field_names.push_back(c.name);
    m->field_ids_of.push_back(c.ids_of);
    m->field_dims.push_back(c.embedding_dim > 0 ? c.embedding_dim : m->embedding_dim);
  }
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelOptions& options) {
  nn::UseSingleThreadedBlas();
  if (options.graph == nullptr) {
    PS_RETURN_IF_ERROR(CheckModelName(options.name));
    PS_RETURN_IF_ERROR(CheckDropout(options.name, options.dropout));
  } else {
    PS_RETURN_IF_ERROR(CheckDropout("graph", options.dropout));
  }
  // A built-in network is the graph of its name and shape flags.
  PS_ASSIGN_OR_RETURN(const ModelOptions network, WithNetworkGraph(options));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Device> device, nn::CreateDevice(options.device));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateGraphModel(network, std::move(device)));
  PS_RETURN_IF_ERROR(
      CheckTablePatterns("table_weight_decay", options.table_weight_decay, model->tables()));
  std::vector<std::pair<std::string, float>> init_patterns;
  for (const auto& [pattern, init] : options.table_init) init_patterns.emplace_back(pattern, 0.0f);
  PS_RETURN_IF_ERROR(CheckTablePatterns("table_init", init_patterns, model->tables()));
  return model;
}

}  // namespace pstrain::worker
