// Wide & Deep (Cheng et al. 2016) for CTR: the wide part is a sparse linear
// model over the ids (one 1-wide table per field, "wide.C<f>", zero-init);
// the deep part concatenates one sum-pooled embedding per field ("emb.C<f>",
// embedding_dim wide) with the dense features and runs an MLP (deep_mlp, ReLU
// after every hidden layer, then a linear 1-wide layer; tables
// deep.<i>.weight/bias). logit = wide + deep. Not thread-safe.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 0, num_sparse >= 0, embedding_dim >= 1
// and every deep_mlp width is positive.
absl::StatusOr<std::unique_ptr<Model>> CreateWideDeepModel(const ModelOptions& options,
                                                           std::unique_ptr<nn::Device> device);

}  // namespace pstrain::worker
