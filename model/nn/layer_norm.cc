#include "model/nn/layer_norm.h"

#include <algorithm>
#include <cmath>

namespace pstrain::worker::nn {

void LayerNormForward(ConstMatrixView x, const float* gain, const float* bias, MatrixView y,
                      float* stats) {
  const int d = x.cols;
  for (int r = 0; r < x.rows; ++r) {
    const float* xr = x.row(r);
    float mean = 0.0f;
    for (int c = 0; c < d; ++c) mean += xr[c];
    mean /= static_cast<float>(d);
    float var = 0.0f;
    for (int c = 0; c < d; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(d) + kLayerNormEps);
    float* yr = y.row(r);
    for (int c = 0; c < d; ++c) yr[c] = gain[c] * (xr[c] - mean) * rstd + bias[c];
    stats[2 * static_cast<size_t>(r)] = mean;
    stats[2 * static_cast<size_t>(r) + 1] = rstd;
  }
}

void LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                       ConstMatrixView dy, MatrixView dx, float* dgain, float* dbias,
                       bool accumulate) {
  const int d = x.cols;
  if (!accumulate) {
    std::fill(dgain, dgain + d, 0.0f);
    std::fill(dbias, dbias + d, 0.0f);
  }
  for (int r = 0; r < x.rows; ++r) {
    const float* xr = x.row(r);
    const float* g = dy.row(r);
    const float mean = stats[2 * static_cast<size_t>(r)];
    const float rstd = stats[2 * static_cast<size_t>(r) + 1];
    // dxhat = dy * gain; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
    float m1 = 0.0f, m2 = 0.0f;
    for (int c = 0; c < d; ++c) {
      const float xhat = (xr[c] - mean) * rstd;
      const float dxhat = g[c] * gain[c];
      m1 += dxhat;
      m2 += dxhat * xhat;
      dgain[c] += g[c] * xhat;
      dbias[c] += g[c];
    }
    m1 /= static_cast<float>(d);
    m2 /= static_cast<float>(d);
    float* out = dx.row(r);
    for (int c = 0; c < d; ++c) {
      const float xhat = (xr[c] - mean) * rstd;
      out[c] = rstd * (g[c] * gain[c] - m1 - xhat * m2);
    }
  }
}

}  // namespace pstrain::worker::nn
