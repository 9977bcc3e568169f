#include "model/nn/concat.h"

#include <cassert>
#include <cstring>

namespace pstrain::worker::nn {

void CopyMatrix(ConstMatrixView src, MatrixView dst) {
  assert(src.rows == dst.rows && src.cols == dst.cols);
  if (src.empty()) return;
  if (src.contiguous() && dst.contiguous()) {
    std::memcpy(dst.data, src.data, sizeof(float) * static_cast<size_t>(src.rows) * src.cols);
    return;
  }
  for (int r = 0; r < src.rows; ++r) {
    std::memcpy(dst.row(r), src.row(r), sizeof(float) * src.cols);
  }
}

void ConcatForward(std::span<const ConstMatrixView> parts, MatrixView out) {
  int col = 0;
  for (const ConstMatrixView& p : parts) {
    CopyMatrix(p, out.Columns(col, p.cols));
    col += p.cols;
  }
  assert(col == out.cols);
}

void ConcatBackward(ConstMatrixView d_out, std::span<const MatrixView> d_parts) {
  int col = 0;
  for (const MatrixView& p : d_parts) {
    if (p.data != nullptr) CopyMatrix(d_out.Columns(col, p.cols), p);
    col += p.cols;
  }
  assert(col == d_out.cols);
}

}  // namespace pstrain::worker::nn
