// Pipeline mode's cut of a network's graph: the `mlp` (or `linear`) layer
// that feeds its only head is the tower pipeline mode cuts into stages of
// Linear layers; everything below it (embeddings, attention, experts,
// interactions, the layers of the built-in networks' bottoms) is the
// FeatureHead that stage 0 runs, on the graph model's own layer code. The
// built-in networks cut so are dlrm, dcn_v2 and deep_tower (their towers:
// "top", "top", "tower"); a model file cuts when its one head is fed by
// such a layer. Pure functions, except the head (not thread-safe).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/model_graph.h"
#include "model/models/feature_head.h"
#include "model/models/model.h"

namespace pstrain::worker {

// The network of `options`: its model file's graph, or the built-in
// network's (BuiltInGraph).
absl::StatusOr<graph::ModelGraph> NetworkGraph(const ModelOptions& options);

struct GraphTower {
  int layer = -1;           // its position in the graph's layers
  std::string name;         // its tables: "<name>.<i>.weight" and ".bias"
  int in = 0;               // the width of its input
  std::vector<int> widths;  // its Linear layers' widths, the last 1 (the logit)
  bool relu_last = false;
};

// Where pipeline mode cuts `options`' network. InvalidArgument naming the
// head or layer when it cannot: several heads or a regression head, a head
// fed by another kind of layer, dropout (not built for pipeline mode).
absl::StatusOr<GraphTower> FindGraphTower(const ModelOptions& options);

// The network below its tower, over `model`'s tables (`model` is the same
// options' model: the tables are found by id). Runs on host memory.
absl::StatusOr<std::unique_ptr<FeatureHead>> CreateGraphFeatureHead(const ModelOptions& options,
                                                                    const Model& model);

}  // namespace pstrain::worker
