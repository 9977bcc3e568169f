// CUDA kernels of layer normalization (layer_norm.h): a thread per row for
// the forward and the input gradient (rows are a sequence's items, a few
// tens of columns wide); a thread per column sums the gain's and bias's
// gradients over the rows, in the rows' order as the CPU does.
#include <algorithm>
#include <cstddef>

#include "model/nn/kernels_cuda.h"

namespace pstrain::worker::nn::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr float kEps = 1e-5f;  // layer_norm.h's kLayerNormEps

int BlocksFor(size_t n) {
  return static_cast<int>(
      std::max<size_t>(1, std::min<size_t>((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

#define PS_NORM_GRID_LOOP(e, n)                                               \
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       e < (n); e += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void LayerNormForwardKernel(const float* x, int x_stride, int rows, int d,
                                       const float* gain, const float* bias, float* y,
                                       int y_stride, float* stats) {
  PS_NORM_GRID_LOOP(r, static_cast<size_t>(rows)) {
    const float* xr = x + r * x_stride;
    float mean = 0.0f;
    for (int c = 0; c < d; ++c) mean += xr[c];
    mean /= static_cast<float>(d);
    float var = 0.0f;
    for (int c = 0; c < d; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = 1.0f / sqrtf(var / static_cast<float>(d) + kEps);
    float* yr = y + r * y_stride;
    for (int c = 0; c < d; ++c) yr[c] = gain[c] * (xr[c] - mean) * rstd + bias[c];
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

__global__ void LayerNormInputGradKernel(const float* x, int x_stride, int rows, int d,
                                         const float* gain, const float* stats, const float* dy,
                                         int dy_stride, float* dx, int dx_stride) {
  PS_NORM_GRID_LOOP(r, static_cast<size_t>(rows)) {
    const float* xr = x + r * x_stride;
    const float* g = dy + r * dy_stride;
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    float m1 = 0.0f, m2 = 0.0f;
    for (int c = 0; c < d; ++c) {
      const float dxhat = g[c] * gain[c];
      m1 += dxhat;
      m2 += dxhat * (xr[c] - mean) * rstd;
    }
    m1 /= static_cast<float>(d);
    m2 /= static_cast<float>(d);
    float* out = dx + r * dx_stride;
    for (int c = 0; c < d; ++c) {
      out[c] = rstd * (g[c] * gain[c] - m1 - (xr[c] - mean) * rstd * m2);
    }
  }
}

__global__ void LayerNormParamGradKernel(const float* x, int x_stride, int rows, int d,
                                         const float* stats, const float* dy, int dy_stride,
                                         float* dgain, float* dbias, bool accumulate) {
  PS_NORM_GRID_LOOP(c, static_cast<size_t>(d)) {
    float sg = accumulate ? dgain[c] : 0.0f, sb = accumulate ? dbias[c] : 0.0f;
    for (int r = 0; r < rows; ++r) {
      const float g = dy[static_cast<size_t>(r) * dy_stride + c];
      sg += g * (x[static_cast<size_t>(r) * x_stride + c] - stats[2 * r]) * stats[2 * r + 1];
      sb += g;
    }
    dgain[c] = sg;
    dbias[c] = sb;
  }
}

}  // namespace

cudaError_t LayerNormForward(const float* x, int x_stride, int rows, int d, const float* gain,
                             const float* bias, float* y, int y_stride, float* stats,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LayerNormForwardKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(x, x_stride, rows, d, gain,
                                                                   bias, y, y_stride, stats);
  return cudaGetLastError();
}

cudaError_t LayerNormBackward(const float* x, int x_stride, int rows, int d, const float* gain,
                              const float* stats, const float* dy, int dy_stride, float* dx,
                              int dx_stride, float* dgain, float* dbias, bool accumulate,
                              cudaStream_t stream) {
  if (rows > 0) {
    LayerNormInputGradKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(
        x, x_stride, rows, d, gain, stats, dy, dy_stride, dx, dx_stride);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  LayerNormParamGradKernel<<<BlocksFor(d), kThreads, 0, stream>>>(
      x, x_stride, rows, d, stats, dy, dy_stride, dgain, dbias, accumulate);
  return cudaGetLastError();
}

}  // namespace pstrain::worker::nn::cuda_kernels
