// GraphModel: the Model a model file describes (model/graph/model_graph.h),
// on the contract every model keeps (tables, Plan, TrainStep, Predict), so
// ps and allreduce modes, streaming, export and serving run it as they run
// the built-in networks.
//
// Tables, in this order: each layer's, in the file's order ("<layer>.<i>.
// weight" and ".bias" for mlp and linear layers, DCN-v2's "<layer>.<l>.*"
// for cross), then one embedding table per categorical column
// ("emb.<column>"). Tensors live where their reader wants them: the output
// read by one layer of several inputs is written straight into that
// layer's input block (no concatenation copies), the others in buffers of
// their own; a tensor read by several layers sums their gradients.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/graph/model_graph.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// Builds the model of options.graph. InvalidArgument naming the file, line
// and layer for a graph that does not fit the job's columns.
absl::StatusOr<std::unique_ptr<Model>> CreateGraphModel(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device);

// The graph's inputs from the job's columns (ModelOptions).
graph::GraphInputs GraphInputsOf(const ModelOptions& options);

}  // namespace pstrain::worker
