// Concat along columns on the CPU: [x_0 | x_1 | ...] per row, and its
// backward (splitting the gradient). Models usually avoid the copy by having
// each producer write straight into a column block of the concatenated
// matrix (MatrixView::Columns); these functions serve the rest (e.g. raw
// dense features). Stateless, thread-safe for distinct outputs.
#pragma once

#include <span>

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// dst = src. REQUIRES: same shape; no overlap.
void CopyMatrix(ConstMatrixView src, MatrixView dst);

// out = [parts[0] | parts[1] | ...]. REQUIRES: all parts have out.rows rows
// and their widths sum to out.cols.
void ConcatForward(std::span<const ConstMatrixView> parts, MatrixView out);

// d_parts[i] = the matching column block of d_out. A part whose view has a
// null data pointer is skipped (its gradient is not needed).
void ConcatBackward(ConstMatrixView d_out, std::span<const MatrixView> d_parts);

}  // namespace pstrain::worker::nn
