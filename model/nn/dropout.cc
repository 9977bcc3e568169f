#include "model/nn/dropout.h"

namespace pstrain::worker::nn {

void DropoutForward(MatrixView y, float rate, uint64_t seed, int64_t first_row) {
  const float scale = 1.0f / (1.0f - rate);
  const uint64_t cols = static_cast<uint64_t>(y.cols);
  for (int r = 0; r < y.rows; ++r) {
    float* row = y.row(r);
    const uint64_t base = static_cast<uint64_t>(first_row + r) * cols;
    for (int c = 0; c < y.cols; ++c) {
      row[c] = DropoutKeep(seed, base + c, rate) ? row[c] * scale : 0.0f;
    }
  }
}

void DropoutBackward(ConstMatrixView y, MatrixView dy, float rate) {
  const float scale = 1.0f / (1.0f - rate);
  for (int r = 0; r < dy.rows; ++r) {
    const float* yr = y.row(r);
    float* g = dy.row(r);
    for (int c = 0; c < dy.cols; ++c) g[c] = yr[c] != 0.0f ? g[c] * scale : 0.0f;
  }
}

}  // namespace pstrain::worker::nn
