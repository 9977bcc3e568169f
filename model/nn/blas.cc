#include "model/nn/blas.h"

#include <cblas.h>

#include <mutex>

namespace pstrain::worker::nn {
namespace {

CBLAS_TRANSPOSE ToCblas(Trans t) { return t == Trans::kYes ? CblasTrans : CblasNoTrans; }

}  // namespace

void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void Sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int i = 0; i < m; ++i) {
      float* row = c + static_cast<size_t>(i) * ldc;
      for (int j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

void Sgemv(Trans trans_a, int m, int n, float alpha, const float* a, int lda, const float* x,
           int incx, float beta, float* y, int incy) {
  int out = trans_a == Trans::kYes ? n : m;
  if (out == 0) return;
  if ((trans_a == Trans::kYes ? m : n) == 0) {
    for (int i = 0; i < out; ++i) y[i * incy] = beta == 0.0f ? 0.0f : beta * y[i * incy];
    return;
  }
  if (beta == 0.0f) {
    // Overwrite even NaN garbage: some BLAS builds scale y by beta instead.
    for (int i = 0; i < out; ++i) y[i * incy] = 0.0f;
  }
  cblas_sgemv(CblasRowMajor, ToCblas(trans_a), m, n, alpha, a, lda, x, incx, beta, y, incy);
}

}  // namespace pstrain::worker::nn
