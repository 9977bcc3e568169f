// CreateModel(): picks the device and the model named in the options.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/graph/graph_model.h"
#include "model/models/dcn_v2_model.h"
#include "model/models/deep_tower_model.h"
#include "model/models/deepfm_model.h"
#include "model/models/dlrm_model.h"
#include "model/models/lr_model.h"
#include "model/models/model.h"
#include "model/models/table_registry.h"
#include "model/models/wide_deep_model.h"
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

namespace {

absl::StatusOr<std::unique_ptr<Model>> CreateNamedModel(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device) {
  const std::string& name = options.name;
  if (name == "lr") return CreateLrModel(options, std::move(device));
  if (name == "wide_deep") return CreateWideDeepModel(options, std::move(device));
  if (name == "deep_tower") return CreateDeepTowerModel(options, std::move(device));
  if (name == "dcn_v2") return CreateDcnV2Model(options, std::move(device));
  if (name == "deepfm") return CreateDeepFmModel(options, std::move(device));
  return CreateDlrmModel(options, std::move(device));
}

}  // namespace

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
  m->label_names = LabelNames(schema);
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
  PS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Device> device, nn::CreateDevice(options.device));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      options.graph != nullptr ? CreateGraphModel(options, std::move(device))
                                               : CreateNamedModel(options, std::move(device)));
  PS_RETURN_IF_ERROR(
      CheckTablePatterns("table_weight_decay", options.table_weight_decay, model->tables()));
  return model;
}

}  // namespace pstrain::worker
