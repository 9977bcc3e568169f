// How a model is cut for pipeline mode: a "head" (the network's graph below
// its tower: embeddings and whatever is not a plain sequence of layers,
// DLRM's bottom MLP and dot interaction, deep_tower's embedding concat, a
// model file's attention) followed by a tower of Linear layers (the mlp
// feeding the one head: DLRM's top MLP, deep_tower's MLP, each ending in
// the 1-wide logit layer).
// Stage 0 owns the head and the first tower layers; later stages own
// contiguous tower layers; the last stage ends with the loss.
//
// The description is derived from the model's own table list (tables are
// found by name), so a stage pulls exactly the tables the unsplit model
// defines. Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/models/feature_head.h"
#include "model/nn/layer_stack.h"

namespace pstrain::worker {

struct PipelineModelSpec {
  std::string name;
  std::vector<LinearSpec> tower;
  // Estimated cost of one step (forward + backward, in FLOP-equivalents) of
  // each tower layer and of the head, for `batch_rows` rows.
  std::vector<double> layer_cost;
  double head_cost = 0;
};

// OK for the networks pipeline mode cuts: the built-in dlrm, deep_tower and
// dcn_v2, and a model file whose one head is fed by an mlp (the tower:
// model/graph/graph_head.h); else InvalidArgument naming the head or layer.
absl::Status CheckPipelineModel(const ModelOptions& options);
// The tower of `model` (`options`' network) and the costs of its layers
// and of the head below it, for `batch_rows` rows.
absl::StatusOr<PipelineModelSpec> DescribePipelineModel(const ModelOptions& options,
                                                        const Model& model, int batch_rows);

// Tower layers [first[k], first[k + 1]) belong to stage k.
struct StagePartition {
  std::vector<int> first;  // stages + 1 entries; first[0] == 0, last == tower size
  int stages() const { return static_cast<int>(first.size()) - 1; }
  int begin(int stage) const { return first[stage]; }
  int end(int stage) const { return first[stage + 1]; }
};

// Splits the tower into `stages` non-empty contiguous ranges. With
// `explicit_ranges` ("0-5,6-11,..."; inclusive ranges of tower layers,
// which must cover the tower in order) those are used; otherwise the split
// minimizes the most expensive stage (head cost counted on stage 0).
// InvalidArgument for bad ranges or more stages than tower layers.
absl::StatusOr<StagePartition> PartitionTower(const PipelineModelSpec& spec, int stages,
                                              const std::string& explicit_ranges);

// "stage 0: head + layers 0-12 (53% of the cost), stage 1: layers 13-24 (47%)".
std::string DescribePartition(const PipelineModelSpec& spec, const StagePartition& partition);

}  // namespace pstrain::worker
