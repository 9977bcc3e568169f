#include "model/nn/attention_pooling.h"

#include <algorithm>

namespace pstrain::worker::nn {

void AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                       ConstMatrixView target, MatrixView features) {
  const int d = target.cols;
  for (int b = 0; b < bags.batch; ++b) {
    const float* t = target.row(b);
    for (uint32_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(bags.index[k]) * d;
      float* f = features.row(static_cast<int>(k - first));
      for (int c = 0; c < d; ++c) {
        f[c] = h[c];
        f[d + c] = t[c];
        f[2 * d + c] = h[c] - t[c];
        f[3 * d + c] = h[c] * t[c];
      }
    }
  }
}

void WeightedBagSum(const float* items, const Bags& bags, uint32_t first, const float* scores,
                    MatrixView out) {
  const int d = out.cols;
  for (int b = 0; b < bags.batch; ++b) {
    float* o = out.row(b);
    std::fill(o, o + d, 0.0f);
    for (uint32_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(bags.index[k]) * d;
      const float s = scores[k - first];
      for (int c = 0; c < d; ++c) o[c] += s * h[c];
    }
  }
}

void WeightedBagDot(ConstMatrixView d_out, const float* items, const Bags& bags, uint32_t first,
                    float* d_scores) {
  const int d = d_out.cols;
  for (int b = 0; b < bags.batch; ++b) {
    const float* g = d_out.row(b);
    for (uint32_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(bags.index[k]) * d;
      float s = 0.0f;
      for (int c = 0; c < d; ++c) s += g[c] * h[c];
      d_scores[k - first] = s;
    }
  }
}

void AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                              const float* items, const Bags& bags, uint32_t first,
                              const float* scores, ConstMatrixView target, float* d_items,
                              MatrixView d_target) {
  const int d = d_out.cols;
  for (int b = 0; b < bags.batch; ++b) {
    const float* g = d_out.row(b);
    const float* t = target.row(b);
    float* dt = d_target.data != nullptr ? d_target.row(b) : nullptr;
    if (dt != nullptr) std::fill(dt, dt + d, 0.0f);
    for (uint32_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(bags.index[k]) * d;
      float* dh = d_items + static_cast<size_t>(bags.index[k]) * d;
      const float s = scores[k - first];
      const float* df = d_features.row(static_cast<int>(k - first));
      for (int c = 0; c < d; ++c) {
        // out = s h; features [h, t, h - t, h * t].
        dh[c] += s * g[c] + df[c] + df[2 * d + c] + df[3 * d + c] * t[c];
        if (dt != nullptr) dt[c] += df[d + c] - df[2 * d + c] + df[3 * d + c] * h[c];
      }
    }
  }
}

}  // namespace pstrain::worker::nn
