// DLRM (Naumov et al. 2019): a bottom MLP over the dense features (ReLU after
// every layer; its last width equals embedding_dim), one sum-pooled embedding
// table per sparse field ("emb.C1".."emb.C<n>"), the dot interaction of the
// bottom output with the embeddings (strict lower triangle, concatenated with
// the bottom output), and a top MLP (ReLU after every layer but the final
// 1-wide one) giving the click logit. Tables: bottom.<i>.weight/bias,
// emb.C<f>, top.<i>.weight/bias. Not thread-safe (Model contract).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/feature_head.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 1, num_sparse >= 0, embedding_dim >= 1,
// bottom_mlp non-empty with last width == embedding_dim, widths positive.
// Computes on `device`.
absl::StatusOr<std::unique_ptr<Model>> CreateDlrmModel(const ModelOptions& options,
                                                       std::unique_ptr<nn::Device> device);

// DLRM's head (bottom MLP, embeddings, dot interaction) over `model`'s
// tables: the model's own, and pipeline mode's stage 0.
absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDlrmHead(const ModelOptions& options,
                                                            const Model& model);

}  // namespace pstrain::worker
