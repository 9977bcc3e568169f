// Linear (fully connected) layer with an optional fused ReLU, and the
// standalone ReLU, on the CPU. Functional: weights come in as pointers and
// gradients are written to caller-owned memory, so the same code serves a
// whole model, a pipeline stage or a tensor-parallel slice of a layer.
// Shapes: x [B x in], W [out x in] row-major (PyTorch layout), b [out],
// y [B x out]. Views may be strided (e.g. a block of columns of a larger
// activation). Stateless and thread-safe for distinct outputs.
#pragma once

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

enum class Activation : unsigned char { kNone = 0, kRelu = 1 };

// y = act(x W^T + b). `b` may be null (no bias).
// REQUIRES: x.rows == y.rows, W holds y.cols x x.cols floats; y does not
// alias x or W.
void LinearForward(ConstMatrixView x, const float* w, const float* b, Activation act,
                   MatrixView y);

// Backward of LinearForward given its input `x`, weights `w` and output `y`.
// `dy` holds dL/dy on entry and dL/d(pre-activation) on return (in place).
// Writes dw [out x in] and, when non-null, db [out]: overwritten, or added to
// with `accumulate` (a batch processed in row chunks). Overwrites dx [B x in]
// unless dx.data is null (first layer: input gradient not needed).
void LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y, Activation act,
                    MatrixView dy, float* dw, float* db, MatrixView dx, bool accumulate = false);

// y = act(y + b) in place; `b` may be null.
void BiasActivation(const float* b, Activation act, MatrixView y);

// dy = dy * act'(y) in place (y: the activation's output); db (when non-null)
// = column sums of the result (+= with `accumulate`).
void BiasActivationBackward(ConstMatrixView y, Activation act, MatrixView dy, float* db,
                            bool accumulate = false);

// y = max(x, 0). y may equal x (same data and stride).
void ReluForward(ConstMatrixView x, MatrixView y);
// dx = dy * (y > 0), y: the ReLU's output. dx may equal dy.
void ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx);

}  // namespace pstrain::worker::nn
