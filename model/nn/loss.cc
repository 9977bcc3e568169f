#include "model/nn/loss.h"

#include <algorithm>
#include <cmath>

namespace pstrain::worker::nn {

double BceFromLogit(double z, double y) {
  return std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
}

double SigmoidBceLoss(const float* logits, const float* labels, int n, float* dlogits) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const float z = logits[i];
    const float y = labels[i];
    sum += BceFromLogit(z, y);
    dlogits[i] = SigmoidOf(z) - y;
  }
  return sum;
}

void Sigmoid(const float* logits, int n, float* probs) {
  for (int i = 0; i < n; ++i) probs[i] = SigmoidOf(logits[i]);
}

}  // namespace pstrain::worker::nn
