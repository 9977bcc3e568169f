// The six built-in networks (--model=lr | wide_deep | dlrm | deep_tower |
// dcn_v2 | deepfm) as model-file graphs of the job's shape flags
// (--bottom_mlp, --top_mlp, --deep_mlp, --cross_layers, --cross_rank), so a
// built-in network and a model file run one implementation: the graph
// model. With the flags' defaults each is the file shipped in
// examples/models/<name>.json (tested). Pure functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "model/graph/model_graph.h"
#include "model/models/model.h"

namespace pstrain::worker {

// The network options.name names, with options' shape. InvalidArgument for
// an unknown name or a shape the network cannot have (naming the flag).
absl::StatusOr<graph::ModelGraph> BuiltInGraph(const ModelOptions& options);

// `options` with its network's graph: a model file's as it is; a built-in
// network's built (BuiltInGraph), each column looking up a table of its own
// as before model files (a model file shares one among a schema's ids_like
// columns).
absl::StatusOr<ModelOptions> WithNetworkGraph(const ModelOptions& options);

}  // namespace pstrain::worker
