// Logistic regression over sparse and dense features:
//   logit = sum_f sum_{id in field f} w_f[id] + <w_dense, dense> + b.
// One 1-wide sparse table per field ("lr.C<f>") rather than one shared
// table: ids of different fields never collide, and each field's weights
// shard and can be inspected on their own. Dense weights "lr.dense.weight"
// ([num_dense], absent when num_dense == 0) and "lr.bias" ([1]). All start at
// zero, as usual for a convex model. Not thread-safe.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/nn/device.h"

namespace pstrain::worker {

// InvalidArgument unless num_dense >= 0 and num_sparse >= 0.
absl::StatusOr<std::unique_ptr<Model>> CreateLrModel(const ModelOptions& options,
                                                     std::unique_ptr<nn::Device> device);

}  // namespace pstrain::worker
