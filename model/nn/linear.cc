#include "model/nn/linear.h"

#include <cassert>

#include "model/nn/blas.h"

namespace pstrain::worker::nn {

void LinearForward(ConstMatrixView x, const float* w, const float* b, Activation act,
                   MatrixView y) {
  assert(x.rows == y.rows);
  const int batch = x.rows, in = x.cols, out = y.cols;
  if (batch == 0 || out == 0) return;
  if (out == 1) {
    // A single output (the logit layer) is a matrix-vector product.
    Sgemv(Trans::kNo, batch, in, 1.0f, x.data, x.stride, w, 1, 0.0f, y.data, y.stride);
  } else {
    Sgemm(Trans::kNo, Trans::kYes, batch, out, in, 1.0f, x.data, x.stride, w, in, 0.0f, y.data,
          y.stride);
  }
  if (b != nullptr || act != Activation::kNone) BiasActivation(b, act, y);
}

void LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y, Activation act,
                    MatrixView dy, float* dw, float* db, MatrixView dx, bool accumulate) {
  assert(x.rows == dy.rows && y.rows == dy.rows && y.cols == dy.cols);
  const int batch = x.rows, in = x.cols, out = dy.cols;
  const float beta = accumulate ? 1.0f : 0.0f;
  BiasActivationBackward(y, act, dy, db, accumulate);
  if (out == 1) {
    // dW[in] = x^T dy; dx = dy w^T (an outer product).
    Sgemv(Trans::kYes, batch, in, 1.0f, x.data, x.stride, dy.data, dy.stride, beta, dw, 1);
    if (dx.data != nullptr) {
      for (int r = 0; r < batch; ++r) {
        const float g = dy.at(r, 0);
        float* dxr = dx.row(r);
        for (int i = 0; i < in; ++i) dxr[i] = g * w[i];
      }
    }
    return;
  }
  // dW[out x in] = dy^T x.
  Sgemm(Trans::kYes, Trans::kNo, out, in, batch, 1.0f, dy.data, dy.stride, x.data, x.stride, beta,
        dw, in);
  // dx[B x in] = dy W.
  if (dx.data != nullptr) {
    Sgemm(Trans::kNo, Trans::kNo, batch, in, out, 1.0f, dy.data, dy.stride, w, in, 0.0f, dx.data,
          dx.stride);
  }
}

void BiasActivation(const float* b, Activation act, MatrixView y) {
  const int cols = y.cols;
  for (int r = 0; r < y.rows; ++r) {
    float* __restrict row = y.row(r);
    if (b != nullptr && act == Activation::kRelu) {
      for (int c = 0; c < cols; ++c) {
        const float v = row[c] + b[c];
        row[c] = v > 0.0f ? v : 0.0f;
      }
    } else if (b != nullptr) {
      for (int c = 0; c < cols; ++c) row[c] += b[c];
    } else if (act == Activation::kRelu) {
      for (int c = 0; c < cols; ++c) row[c] = row[c] > 0.0f ? row[c] : 0.0f;
    }
  }
}

void BiasActivationBackward(ConstMatrixView y, Activation act, MatrixView dy, float* db,
                            bool accumulate) {
  const int cols = dy.cols;
  if (db != nullptr && !accumulate) {
    for (int c = 0; c < cols; ++c) db[c] = 0.0f;
  }
  for (int r = 0; r < dy.rows; ++r) {
    float* __restrict g = dy.row(r);
    if (act == Activation::kRelu) {
      const float* __restrict yr = y.row(r);
      for (int c = 0; c < cols; ++c) g[c] = yr[c] > 0.0f ? g[c] : 0.0f;
    }
    if (db != nullptr) {
      for (int c = 0; c < cols; ++c) db[c] += g[c];
    }
  }
}

void ReluForward(ConstMatrixView x, MatrixView y) {
  assert(x.rows == y.rows && x.cols == y.cols);
  for (int r = 0; r < x.rows; ++r) {
    const float* xr = x.row(r);
    float* yr = y.row(r);
    for (int c = 0; c < x.cols; ++c) yr[c] = xr[c] > 0.0f ? xr[c] : 0.0f;
  }
}

void ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx) {
  assert(y.rows == dy.rows && y.cols == dy.cols && dx.rows == dy.rows && dx.cols == dy.cols);
  for (int r = 0; r < y.rows; ++r) {
    const float* yr = y.row(r);
    const float* g = dy.row(r);
    float* out = dx.row(r);
    for (int c = 0; c < y.cols; ++c) out[c] = yr[c] > 0.0f ? g[c] : 0.0f;
  }
}

}  // namespace pstrain::worker::nn
