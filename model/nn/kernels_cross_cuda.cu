// CUDA kernels of the feature-crossing layers (feature_cross.h): matrix add,
// DCN-v2's cross combine and the FM second-order term; and dropout
// (dropout.h), whose mask is the CPU's (the same hash of seed and index). Elementwise ops use a
// grid-stride loop over rows x cols; FM gives each row one thread, which
// loops over its fields (n x dim is small next to the towers' products).
#include <algorithm>
#include <cstddef>

#include "model/nn/dropout.h"
#include "model/nn/kernels_cuda.h"

namespace pstrain::worker::nn::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

int BlocksFor(size_t n) {
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + kThreads - 1) / kThreads,
                                                               kMaxBlocks)));
}

#define PS_CROSS_GRID_LOOP(e, n)                                              \
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       e < (n); e += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void AddMatrixKernel(const float* src, int src_stride, float* dst, int dst_stride,
                                int rows, int cols) {
  const size_t total = static_cast<size_t>(rows) * cols;
  PS_CROSS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    dst[r * dst_stride + c] += src[r * src_stride + c];
  }
}

__global__ void DropoutForwardKernel(float* y, int y_stride, int rows, int cols, float rate,
                                     uint64_t seed, int64_t first_row) {
  const size_t total = static_cast<size_t>(rows) * cols;
  const float scale = 1.0f / (1.0f - rate);
  PS_CROSS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    const uint64_t index = static_cast<uint64_t>(first_row + static_cast<int64_t>(r)) * cols + c;
    float& v = y[r * y_stride + c];
    v = DropoutKeep(seed, index, rate) ? v * scale : 0.0f;
  }
}

__global__ void DropoutBackwardKernel(const float* y, int y_stride, float* dy, int dy_stride,
                                      int rows, int cols, float rate) {
  const size_t total = static_cast<size_t>(rows) * cols;
  const float scale = 1.0f / (1.0f - rate);
  PS_CROSS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    float& g = dy[r * dy_stride + c];
    g = y[r * y_stride + c] != 0.0f ? g * scale : 0.0f;
  }
}

__global__ void CrossCombineForwardKernel(const float* x0, int x0_stride, const float* u,
                                          int u_stride, const float* xl, int xl_stride,
                                          float* out, int out_stride, int rows, int cols) {
  const size_t total = static_cast<size_t>(rows) * cols;
  PS_CROSS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    out[r * out_stride + c] = x0[r * x0_stride + c] * u[r * u_stride + c] + xl[r * xl_stride + c];
  }
}

__global__ void CrossCombineBackwardKernel(const float* g, int g_stride, const float* x0,
                                           int x0_stride, const float* u, int u_stride,
                                           float* du, int du_stride, float* dx0, int dx0_stride,
                                           int rows, int cols, bool accumulate) {
  const size_t total = static_cast<size_t>(rows) * cols;
  PS_CROSS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    const float gv = g[r * g_stride + c];
    du[r * du_stride + c] = gv * x0[r * x0_stride + c];
    const float d = gv * u[r * u_stride + c];
    float* o = dx0 + r * dx0_stride + c;
    *o = accumulate ? *o + d : d;
  }
}

__global__ void FmForwardKernel(const float* t, int t_stride, int batch, int n, int dim,
                                bool accumulate, float* out, int out_stride) {
  PS_CROSS_GRID_LOOP(b, static_cast<size_t>(batch)) {
    const float* row = t + b * t_stride;
    float fm = 0.0f;
    for (int k = 0; k < dim; ++k) {
      float s = 0.0f, sq = 0.0f;
      for (int f = 0; f < n; ++f) {
        const float v = row[f * dim + k];
        s += v;
        sq += v * v;
      }
      fm += s * s - sq;
    }
    float* o = out + b * out_stride;
    *o = accumulate ? *o + 0.5f * fm : 0.5f * fm;
  }
}

__global__ void FmBackwardKernel(const float* t, int t_stride, const float* dy, int dy_stride,
                                 int batch, int n, int dim, bool accumulate, float* dt,
                                 int dt_stride) {
  PS_CROSS_GRID_LOOP(b, static_cast<size_t>(batch)) {
    const float* row = t + b * t_stride;
    const float g = dy[b * dy_stride];
    float* d = dt + b * dt_stride;
    for (int k = 0; k < dim; ++k) {
      float s = 0.0f;
      for (int f = 0; f < n; ++f) s += row[f * dim + k];
      for (int f = 0; f < n; ++f) {
        const float v = g * (s - row[f * dim + k]);
        d[f * dim + k] = accumulate ? d[f * dim + k] + v : v;
      }
    }
  }
}

}  // namespace

cudaError_t AddMatrix(const float* src, int src_stride, float* dst, int dst_stride, int rows,
                      int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  AddMatrixKernel<<<BlocksFor(total), kThreads, 0, stream>>>(src, src_stride, dst, dst_stride,
                                                            rows, cols);
  return cudaGetLastError();
}

cudaError_t DropoutForward(float* y, int y_stride, int rows, int cols, float rate, uint64_t seed,
                           int64_t first_row, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  DropoutForwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, y_stride, rows, cols, rate,
                                                                  seed, first_row);
  return cudaGetLastError();
}

cudaError_t DropoutBackward(const float* y, int y_stride, float* dy, int dy_stride, int rows,
                            int cols, float rate, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  DropoutBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, y_stride, dy, dy_stride,
                                                                   rows, cols, rate);
  return cudaGetLastError();
}

cudaError_t CrossCombineForward(const float* x0, int x0_stride, const float* u, int u_stride,
                                const float* xl, int xl_stride, float* out, int out_stride,
                                int rows, int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  CrossCombineForwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      x0, x0_stride, u, u_stride, xl, xl_stride, out, out_stride, rows, cols);
  return cudaGetLastError();
}

cudaError_t CrossCombineBackward(const float* g, int g_stride, const float* x0, int x0_stride,
                                 const float* u, int u_stride, float* du, int du_stride,
                                 float* dx0, int dx0_stride, int rows, int cols, bool accumulate,
                                 cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  CrossCombineBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      g, g_stride, x0, x0_stride, u, u_stride, du, du_stride, dx0, dx0_stride, rows, cols,
      accumulate);
  return cudaGetLastError();
}

cudaError_t FmForward(const float* t, int t_stride, int batch, int n, int dim, bool accumulate,
                      float* out, int out_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  FmForwardKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(t, t_stride, batch, n, dim,
                                                             accumulate, out, out_stride);
  return cudaGetLastError();
}

cudaError_t FmBackward(const float* t, int t_stride, const float* dy, int dy_stride, int batch,
                       int n, int dim, bool accumulate, float* dt, int dt_stride,
                       cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  FmBackwardKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(t, t_stride, dy, dy_stride, batch,
                                                              n, dim, accumulate, dt, dt_stride);
  return cudaGetLastError();
}

}  // namespace pstrain::worker::nn::cuda_kernels
