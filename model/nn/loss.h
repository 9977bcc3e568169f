// Sigmoid + binary cross-entropy from logits on the CPU, numerically stable
// for any logit (no exp overflow, no log(0)). Stateless, thread-safe.
#pragma once

#include <cmath>

namespace pstrain::worker::nn {

// Returns sum_i [max(z_i, 0) - z_i * y_i + log(1 + exp(-|z_i|))], the sum of
// per-sample BCE losses of sigmoid(z) against labels y in [0, 1], and writes
// the gradient of that sum, dlogits_i = sigmoid(z_i) - y_i.
// `dlogits` may equal `logits`.
double SigmoidBceLoss(const float* logits, const float* labels, int n, float* dlogits);

// 1 / (1 + exp(-z)), computed without overflow.
inline float SigmoidOf(float z) {
  // exp of a non-positive argument never overflows.
  if (z >= 0.0f) return 1.0f / (1.0f + std::exp(-z));
  const float e = std::exp(z);
  return e / (1.0f + e);
}

// probs_i = 1 / (1 + exp(-z_i)), computed without overflow. probs may equal
// logits.
void Sigmoid(const float* logits, int n, float* probs);

// One sample's loss, max(z, 0) - z * y + log1p(exp(-|z|)), in double.
double BceFromLogit(double z, double y);

}  // namespace pstrain::worker::nn
