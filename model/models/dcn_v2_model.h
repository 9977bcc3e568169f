// DLRM-DCNv2 (MLPerf's recommendation model; Wang et al. 2021): DLRM with its
// dot interaction replaced by DCN-v2 cross layers. A bottom MLP over the
// dense features (ReLU after every layer), one sum-pooled embedding per
// sparse field ("emb.C<f>", any widths), x_0 = [bottom | emb_1 | ... |
// emb_F], cross_layers cross layers over x_0 (low rank cross_rank, 0: full;
// see cross_net.h, tables cross.<l>.*), and a top MLP over the last cross
// layer's output (ReLU after every layer but the final 1-wide one) giving
// the logit. Tables: bottom.<i>.*, emb.C<f>, cross.<l>.*, top.<i>.*.
// Not thread-safe (Model contract).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/feature_head.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 1, num_sparse >= 0, cross_layers >= 1,
// cross_rank >= 0 and the MLP widths are positive.
absl::StatusOr<std::unique_ptr<Model>> CreateDcnV2Model(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device);

// DCN-v2's head (bottom MLP, embeddings, cross layers) over `model`'s
// tables: the model's own, and pipeline mode's stage 0.
absl::StatusOr<std::unique_ptr<FeatureHead>> CreateDcnV2Head(const ModelOptions& options,
                                                             const Model& model);

}  // namespace pstrain::worker
