// The evaluation predictions a worker hands to worker 0 through the
// coordinator's store: a count n, then n probabilities, then n labels. A
// worker that could not score its part hands over why instead: the count
// 2^64 - 1, then the message.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/buffer.h"

namespace pstrain::worker {

Buffer EncodeEvalBlob(const std::vector<float>& probs, const std::vector<float>& labels);

// A part that says why its worker could not score it.
Buffer EncodeEvalError(absl::string_view message);

// Appends the blob's predictions and labels; DataLoss naming `who` when it
// is malformed, FailedPrecondition with the worker's message when it is an
// EncodeEvalError part.
absl::Status AppendEvalBlob(const Buffer& blob, absl::string_view who, std::vector<float>* probs,
                            std::vector<float>* labels);

}  // namespace pstrain::worker
