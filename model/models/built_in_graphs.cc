#include "model/models/built_in_graphs.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/model_base.h"
#include "model/models/table_registry.h"

namespace pstrain::worker {
namespace {

using graph::LayerSpec;
using graph::LayerType;

LayerSpec Layer(std::string name, LayerType type, std::vector<std::string> inputs) {
  LayerSpec l;
  l.name = std::move(name);
  l.type = type;
  l.inputs = std::move(inputs);
  return l;
}

LayerSpec Mlp(std::string name, std::vector<std::string> inputs, std::vector<int> widths) {
  LayerSpec l = Layer(std::move(name), LayerType::kMlp, std::move(inputs));
  l.widths = std::move(widths);
  return l;
}

// A tower to the logit: `hidden` then the 1-wide layer; the job's --dropout
// applies to its hidden layers.
LayerSpec Tower(std::string name, std::vector<std::string> inputs, std::vector<int> hidden) {
  hidden.push_back(1);
  LayerSpec l = Mlp(std::move(name), std::move(inputs), std::move(hidden));
  l.tower = true;
  return l;
}

// "embeddings" then "dense", each when the job has such columns.
std::vector<std::string> EmbeddingsAndDense(const ModelOptions& o) {
  std::vector<std::string> in;
  if (o.num_sparse > 0) in.emplace_back("embeddings");
  if (o.num_dense > 0) in.emplace_back("dense");
  return in;
}

absl::Status CheckColumns(const ModelOptions& o, bool needs_dense) {
  if (o.num_dense < (needs_dense ? 1 : 0) || o.num_sparse < 0 || o.embedding_dim < 1 ||
      o.num_dense + o.num_sparse < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.name, " needs ", needs_dense ? "num_dense >= 1" : "num_dense >= 0",
        ", num_sparse >= 0 (not both 0), embedding_dim >= 1; got ", o.num_dense, ", ",
        o.num_sparse, ", ", o.embedding_dim));
  }
  return absl::OkStatus();
}

// dlrm's dot interaction and deepfm's FM take embeddings of one width.
absl::Status CheckEqualWidths(const ModelOptions& o, const char* why, const char* others) {
  for (int f = 0; f < o.num_sparse; ++f) {
    if (FieldDim(o, f) != o.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.name, ": ", why, " needs every embedding embedding_dim (", o.embedding_dim,
          ") wide, field ", SparseFieldName(o, f), " is ", FieldDim(o, f), " (", others,
          " take per-field widths)"));
    }
  }
  return absl::OkStatus();
}

// [bottom, embeddings...] for dlrm's and dcn_v2's second layer.
std::vector<std::string> BottomAndEmbeddingsInputs(const ModelOptions& o) {
  std::vector<std::string> in = {"bottom"};
  if (o.num_sparse > 0) in.emplace_back("embeddings");
  return in;
}

LayerSpec Bottom(const ModelOptions& o) {
  LayerSpec l = Mlp("bottom", {"dense"}, o.bottom_mlp);
  l.relu_last = true;
  return l;
}

}  // namespace

absl::StatusOr<graph::ModelGraph> BuiltInGraph(const ModelOptions& o) {
  PS_RETURN_IF_ERROR(CheckModelName(o.name));
  graph::ModelGraph g;
  g.name = o.name;
  g.file = absl::StrCat("--model=", o.name);
  graph::HeadSpec head;
  head.name = "click";
  if (o.name == "lr") {
    if (o.num_dense < 0 || o.num_sparse < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lr needs num_dense >= 0, num_sparse >= 0; got ", o.num_dense, ", ", o.num_sparse));
    }
    // A weight per id of every column and a linear layer over the dense
    // columns with a bias (the bias alone without them).
    LayerSpec lr = Layer("lr", LayerType::kWide, {});
    if (o.num_dense > 0) lr.inputs = {"dense"};
    lr.bias = true;
    g.layers.push_back(std::move(lr));
    head.input = "lr";
  } else if (o.name == "wide_deep" || o.name == "deepfm") {
    PS_RETURN_IF_ERROR(CheckColumns(o, /*needs_dense=*/false));
    PS_RETURN_IF_ERROR(CheckWidths("deep_mlp", o.deep_mlp));
    g.layers.push_back(Tower("deep", EmbeddingsAndDense(o), o.deep_mlp));
    // As examples/models/wide_deep.json and deepfm.json: the wide part's
    // tables after the deep tower's, the logits summed in this order.
    std::vector<std::string> sum = {"deep"};
    if (o.num_sparse > 0) g.layers.push_back(Layer("wide", LayerType::kWide, {}));
    if (o.name == "deepfm") {
      PS_RETURN_IF_ERROR(CheckEqualWidths(o, "its factorization machine",
                                          "wide_deep, deep_tower and dcn_v2"));
      // U(-0.01, 0.01): the FM's logit starts near zero. At nn.Linear-like
      // scales (1/sqrt(dim)) the sum of 325 pairwise products of 26 fields
      // starts as noise of standard deviation ~1.5 that one pass does not
      // unlearn (eval AUC 0.60 against 0.71 at 0.01 on 200k generated rows;
      // 0.05: 0.66 at lr 0.05).
      g.embedding_init = ParseEmbeddingInit("uniform:0.01").value();
      if (o.num_sparse > 0) {
        g.layers.push_back(Layer("fm", LayerType::kFm, {"embeddings"}));
        sum.emplace_back("fm");
      }
    }
    if (o.num_sparse > 0) sum.emplace_back("wide");
    if (sum.size() > 1) {
      g.layers.push_back(Layer("logit", LayerType::kAdd, sum));
      head.input = "logit";
    } else {
      head.input = "deep";  // no categorical columns: the tower alone
    }
  } else if (o.name == "dlrm") {
    PS_RETURN_IF_ERROR(CheckColumns(o, /*needs_dense=*/true));
    PS_RETURN_IF_ERROR(CheckEqualWidths(o, "its dot interaction", "wide_deep and deep_tower"));
    if (o.bottom_mlp.empty() || o.bottom_mlp.back() != o.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dlrm: the last bottom_mlp width must equal embedding_dim (", o.embedding_dim, ")"));
    }
    PS_RETURN_IF_ERROR(CheckWidths("bottom_mlp", o.bottom_mlp));
    PS_RETURN_IF_ERROR(CheckWidths("top_mlp", o.top_mlp));
    g.layers.push_back(Bottom(o));
    g.layers.push_back(Layer("interaction", LayerType::kDotInteraction, BottomAndEmbeddingsInputs(o)));
    g.layers.push_back(Tower("top", {"interaction"}, o.top_mlp));
    head.input = "top";
  } else if (o.name == "dcn_v2") {
    PS_RETURN_IF_ERROR(CheckColumns(o, /*needs_dense=*/true));
    if (o.cross_layers < 1 || o.cross_rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dcn_v2 needs cross_layers >= 1 and cross_rank >= 0 (0: full rank); got ", o.cross_layers,
          " and ", o.cross_rank));
    }
    PS_RETURN_IF_ERROR(CheckWidths("bottom_mlp", o.bottom_mlp));
    if (o.bottom_mlp.empty()) {
      return absl::InvalidArgumentError("dcn_v2 needs a bottom_mlp (its output starts x_0)");
    }
    PS_RETURN_IF_ERROR(CheckWidths("top_mlp", o.top_mlp));
    g.layers.push_back(Bottom(o));
    LayerSpec cross = Layer("cross", LayerType::kCross, BottomAndEmbeddingsInputs(o));
    cross.layers = o.cross_layers;
    cross.rank = o.cross_rank;
    g.layers.push_back(std::move(cross));
    g.layers.push_back(Tower("top", {"cross"}, o.top_mlp));
    head.input = "top";
  } else {  // deep_tower
    PS_RETURN_IF_ERROR(CheckColumns(o, /*needs_dense=*/false));
    PS_RETURN_IF_ERROR(CheckWidths("deep_mlp (the deep_tower layers)", o.deep_mlp));
    // He-initialised hidden layers; --dropout does not apply (CheckDropout).
    LayerSpec tower = Mlp("tower", EmbeddingsAndDense(o), o.deep_mlp);
    tower.widths.push_back(1);
    tower.he_init = true;
    g.layers.push_back(std::move(tower));
    head.input = "tower";
  }
  g.heads.push_back(std::move(head));
  return g;
}

absl::StatusOr<ModelOptions> WithNetworkGraph(const ModelOptions& options) {
  if (options.graph != nullptr) return options;
  ModelOptions o = options;
  PS_ASSIGN_OR_RETURN(graph::ModelGraph g, BuiltInGraph(options));
  o.graph = std::make_shared<const graph::ModelGraph>(std::move(g));
  o.field_ids_of.clear();
  return o;
}

}  // namespace pstrain::worker
