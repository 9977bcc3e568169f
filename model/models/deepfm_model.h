// DeepFM (Guo et al. 2017): a factorization machine and a deep tower over
// shared embeddings, their logits summed. First order: one 1-wide table per
// sparse field ("wide.C<f>", zero-init, as wide_deep's wide part). Second
// order: sum over field pairs of <emb_i, emb_j> ("emb.C<f>", U(+-0.01), all
// embedding_dim wide). Deep: an MLP (deep_mlp, ReLU after every hidden
// layer, then a linear 1-wide layer; tables deep.<i>.*) over [emb_1 | ... |
// emb_F | dense features]. logit = first order + second order + deep (the
// deep tower's last bias is the global bias). Not thread-safe.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 0, num_sparse >= 0, embedding_dim >= 1,
// every field embedding_dim wide (the FM's dot products) and deep_mlp widths
// positive.
absl::StatusOr<std::unique_ptr<Model>> CreateDeepFmModel(const ModelOptions& options,
                                                         std::unique_ptr<nn::Device> device);

}  // namespace pstrain::worker
