// deep_tower: a deep MLP on top of embeddings, the model for pipeline
// parallelism (a tower too deep for one stage to be fast). One sum-pooled
// embedding per sparse field ("emb.C<f>") concatenated with the dense
// features, then the tower: deep_mlp hidden layers (e.g. 24 of width 1024;
// ReLU, He-initialized so that the signal keeps its scale through many
// layers) and a final linear 1-wide logit layer; tables
// tower.<i>.weight/bias. Not thread-safe (Model contract).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/feature_head.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 0, num_sparse >= 0, embedding_dim >= 1,
// some input exists and every deep_mlp width is positive.
absl::StatusOr<std::unique_ptr<Model>> CreateDeepTowerModel(const ModelOptions& options,
                                                            std::unique_ptr<nn::Device> device);

// deep_tower's head (the embeddings and dense features, concatenated) over
// `model`'s tables: the model's own, and pipeline mode's stage 0.
absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDeepTowerHead(const ModelOptions& options,
                                                                 const Model& model);

}  // namespace pstrain::worker
