#include "model/nn/expert_mix.h"

#include <algorithm>
#include <cmath>

namespace pstrain::worker::nn {

void ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g, MatrixView out) {
  const int k = z.cols;
  const int width = out.cols;
  for (int r = 0; r < z.rows; ++r) {
    const float* zr = z.row(r);
    float* gr = g.row(r);
    const float top = *std::max_element(zr, zr + k);
    float sum = 0;
    for (int e = 0; e < k; ++e) sum += (gr[e] = std::exp(zr[e] - top));
    for (int e = 0; e < k; ++e) gr[e] /= sum;
    float* o = out.row(r);
    std::fill(o, o + width, 0.0f);
    const float* yr = y.row(r);
    for (int e = 0; e < k; ++e) {
      const float ge = gr[e];
      const float* ye = yr + static_cast<size_t>(e) * width;
      for (int c = 0; c < width; ++c) o[c] += ge * ye[c];
    }
  }
}

void ExpertMixBackward(ConstMatrixView g, ConstMatrixView y, ConstMatrixView d_out,
                       MatrixView dz, MatrixView dy) {
  const int k = g.cols;
  const int width = d_out.cols;
  for (int r = 0; r < g.rows; ++r) {
    const float* gr = g.row(r);
    float* dzr = dz.row(r);
    const float* d = d_out.row(r);
    const float* yr = y.row(r);
    float* dyr = dy.row(r);
    float mean = 0;
    for (int e = 0; e < k; ++e) {
      const float* ye = yr + static_cast<size_t>(e) * width;
      float* dye = dyr + static_cast<size_t>(e) * width;
      float dg = 0;
      for (int c = 0; c < width; ++c) {
        dg += d[c] * ye[c];
        dye[c] = gr[e] * d[c];
      }
      dzr[e] = dg;
      mean += gr[e] * dg;
    }
    for (int e = 0; e < k; ++e) dzr[e] = gr[e] * (dzr[e] - mean);
  }
}

}  // namespace pstrain::worker::nn
