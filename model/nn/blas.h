// Thin, single-threaded wrapper over CBLAS (OpenBLAS) sgemm/sgemv in
// row-major terms, so that the layers read like the math. OpenBLAS is pinned
// to one thread: the trainer runs one model per core, and on shared cores a
// second BLAS thread only adds synchronization. Thread-safe (OpenBLAS with one
// thread is reentrant).
#pragma once

namespace pstrain::worker::nn {

enum class Trans : unsigned char { kNo = 0, kYes = 1 };

// Limits OpenBLAS to one thread. Idempotent and cheap after the first call.
void UseSingleThreadedBlas();

// C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, all row-major
// with leading dimensions lda/ldb/ldc (in floats). k == 0 scales C by beta.
void Sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc);

// y[m'] = alpha * op(A) x + beta * y, A row-major [m x n] with leading
// dimension lda; m' = m (kNo) or n (kYes). incx/incy are element strides.
void Sgemv(Trans trans_a, int m, int n, float alpha, const float* a, int lda, const float* x,
           int incx, float beta, float* y, int incy);

}  // namespace pstrain::worker::nn
