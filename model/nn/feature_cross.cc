#include "model/nn/feature_cross.h"

#include <cassert>
#include <vector>

namespace pstrain::worker::nn {

void CrossCombineForward(ConstMatrixView x0, ConstMatrixView u, ConstMatrixView xl,
                         MatrixView out) {
  assert(x0.rows == out.rows && u.rows == out.rows && xl.rows == out.rows);
  assert(x0.cols == out.cols && u.cols == out.cols && xl.cols == out.cols);
  for (int r = 0; r < out.rows; ++r) {
    const float* a = x0.row(r);
    const float* b = u.row(r);
    const float* c = xl.row(r);
    float* o = out.row(r);
    for (int k = 0; k < out.cols; ++k) o[k] = a[k] * b[k] + c[k];
  }
}

void CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0, ConstMatrixView u,
                          MatrixView du, MatrixView dx0, bool accumulate) {
  assert(g.rows == du.rows && x0.rows == du.rows && u.rows == du.rows && dx0.rows == du.rows);
  for (int r = 0; r < du.rows; ++r) {
    const float* gr = g.row(r);
    const float* a = x0.row(r);
    const float* b = u.row(r);
    float* d_u = du.row(r);
    float* d_x0 = dx0.row(r);
    for (int k = 0; k < du.cols; ++k) d_u[k] = gr[k] * a[k];
    if (accumulate) {
      for (int k = 0; k < du.cols; ++k) d_x0[k] += gr[k] * b[k];
    } else {
      for (int k = 0; k < du.cols; ++k) d_x0[k] = gr[k] * b[k];
    }
  }
}

void AddMatrix(ConstMatrixView src, MatrixView dst) {
  assert(src.rows == dst.rows && src.cols == dst.cols);
  for (int r = 0; r < dst.rows; ++r) {
    const float* s = src.row(r);
    float* d = dst.row(r);
    for (int k = 0; k < dst.cols; ++k) d[k] += s[k];
  }
}

namespace {

// sum[k] = sum_f t_fk of one row.
void FieldSums(const float* row, int n, int dim, float* sum) {
  for (int k = 0; k < dim; ++k) sum[k] = 0.0f;
  for (int f = 0; f < n; ++f) {
    const float* v = row + static_cast<size_t>(f) * dim;
    for (int k = 0; k < dim; ++k) sum[k] += v[k];
  }
}

}  // namespace

void FmForward(ConstMatrixView t, int n, int dim, bool accumulate, MatrixView out) {
  assert(t.cols == n * dim && out.cols == 1 && out.rows == t.rows);
  thread_local std::vector<float> sum;
  sum.resize(dim);
  for (int r = 0; r < t.rows; ++r) {
    const float* row = t.row(r);
    FieldSums(row, n, dim, sum.data());
    float squares = 0.0f, sum_sq = 0.0f;
    for (int i = 0; i < n * dim; ++i) squares += row[i] * row[i];
    for (int k = 0; k < dim; ++k) sum_sq += sum[k] * sum[k];
    const float fm = 0.5f * (sum_sq - squares);
    out.at(r, 0) = accumulate ? out.at(r, 0) + fm : fm;
  }
}

void FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim, bool accumulate,
                MatrixView dt) {
  assert(t.cols == n * dim && dt.cols == n * dim && dy.rows == t.rows && dt.rows == t.rows);
  thread_local std::vector<float> sum;
  sum.resize(dim);
  for (int r = 0; r < t.rows; ++r) {
    const float* row = t.row(r);
    const float g = dy.at(r, 0);
    FieldSums(row, n, dim, sum.data());
    float* d = dt.row(r);
    for (int f = 0; f < n; ++f) {
      const float* v = row + static_cast<size_t>(f) * dim;
      float* dv = d + static_cast<size_t>(f) * dim;
      if (accumulate) {
        for (int k = 0; k < dim; ++k) dv[k] += g * (sum[k] - v[k]);
      } else {
        for (int k = 0; k < dim; ++k) dv[k] = g * (sum[k] - v[k]);
      }
    }
  }
}

}  // namespace pstrain::worker::nn
