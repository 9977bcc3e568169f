// The evaluation predictions a worker hands to worker 0 through the
// coordinator's store: a count n, then n probabilities, then n labels.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/buffer.h"

namespace pstrain::worker {

Buffer EncodeEvalBlob(const std::vector<float>& probs, const std::vector<float>& labels);

// Appends the blob's predictions and labels; DataLoss naming `who` when it
// is malformed.
absl::Status AppendEvalBlob(const Buffer& blob, absl::string_view who, std::vector<float>* probs,
                            std::vector<float>* labels);

}  // namespace pstrain::worker
