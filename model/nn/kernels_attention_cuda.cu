// CUDA kernels of DIN's attention pooling (attention_pooling.h) and of a
// mixture-of-experts gate's mix (expert_mix.h). Bag kernels give each bag
// (row) one block whose threads stride over its items x dim; gradients into
// shared embedding rows use atomicAdd. The gate's softmax gives each row
// one thread (a handful of experts); its weighted sums are elementwise.
#include <algorithm>
#include <cstddef>

#include "model/nn/kernels_cuda.h"

namespace pstrain::worker::nn::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBagThreads = 128;
constexpr int kMaxBlocks = 4096;

int BlocksFor(size_t n, int threads = kThreads) {
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + threads - 1) / threads,
                                                               kMaxBlocks)));
}
int BagBlocks(int batch) { return std::max(1, std::min(batch, kMaxBlocks)); }

#define PS_ATT_GRID_LOOP(e, n)                                                \
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       e < (n); e += static_cast<size_t>(gridDim.x) * blockDim.x)
// Bag b of the grid's blocks, then its items x dim over the block's threads.
#define PS_BAG_LOOP(b, batch) for (int b = blockIdx.x; b < (batch); b += gridDim.x)

__global__ void AttentionFeaturesKernel(const float* items, const uint32_t* index,
                                        const uint32_t* offsets, int batch, uint32_t first,
                                        const float* target, int t_stride, int d, float* f,
                                        int f_stride) {
  PS_BAG_LOOP(b, batch) {
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    const float* t = target + static_cast<size_t>(b) * t_stride;
    const size_t n = static_cast<size_t>(end - begin) * d;
    for (size_t e = threadIdx.x; e < n; e += blockDim.x) {
      const uint32_t k = begin + static_cast<uint32_t>(e / d);
      const int c = static_cast<int>(e % d);
      const float h = items[static_cast<size_t>(index[k]) * d + c];
      float* row = f + static_cast<size_t>(k - first) * f_stride;
      row[c] = h;
      row[d + c] = t[c];
      row[2 * d + c] = h - t[c];
      row[3 * d + c] = h * t[c];
    }
  }
}

__global__ void WeightedBagSumKernel(const float* items, const uint32_t* index,
                                     const uint32_t* offsets, int batch, uint32_t first,
                                     const float* scores, int d, float* out, int out_stride) {
  const size_t total = static_cast<size_t>(batch) * d;
  PS_ATT_GRID_LOOP(e, total) {
    const int b = static_cast<int>(e / d), c = static_cast<int>(e % d);
    float s = 0.0f;
    for (uint32_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      s += scores[k - first] * items[static_cast<size_t>(index[k]) * d + c];
    }
    out[static_cast<size_t>(b) * out_stride + c] = s;
  }
}

__global__ void WeightedBagDotKernel(const float* d_out, int g_stride, const float* items,
                                     const uint32_t* index, const uint32_t* offsets, int batch,
                                     uint32_t first, int d, float* d_scores) {
  PS_BAG_LOOP(b, batch) {
    const float* g = d_out + static_cast<size_t>(b) * g_stride;
    for (uint32_t k = offsets[b] + threadIdx.x; k < offsets[b + 1]; k += blockDim.x) {
      const float* h = items + static_cast<size_t>(index[k]) * d;
      float s = 0.0f;
      for (int c = 0; c < d; ++c) s += g[c] * h[c];
      d_scores[k - first] = s;
    }
  }
}

__global__ void AttentionItemsBackwardKernel(const float* d_out, int g_stride, const float* df,
                                             int df_stride, const uint32_t* index,
                                             const uint32_t* offsets, int batch, uint32_t first,
                                             const float* scores, const float* target,
                                             int t_stride, int d, float* d_items) {
  PS_BAG_LOOP(b, batch) {
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    const float* g = d_out + static_cast<size_t>(b) * g_stride;
    const float* t = target + static_cast<size_t>(b) * t_stride;
    const size_t n = static_cast<size_t>(end - begin) * d;
    for (size_t e = threadIdx.x; e < n; e += blockDim.x) {
      const uint32_t k = begin + static_cast<uint32_t>(e / d);
      const int c = static_cast<int>(e % d);
      const float* f = df + static_cast<size_t>(k - first) * df_stride;
      const float v = scores[k - first] * g[c] + f[c] + f[2 * d + c] + f[3 * d + c] * t[c];
      atomicAdd(d_items + static_cast<size_t>(index[k]) * d + c, v);
    }
  }
}

__global__ void AttentionTargetBackwardKernel(const float* df, int df_stride, const float* items,
                                              const uint32_t* index, const uint32_t* offsets,
                                              int batch, uint32_t first, int d, float* d_target,
                                              int dt_stride) {
  const size_t total = static_cast<size_t>(batch) * d;
  PS_ATT_GRID_LOOP(e, total) {
    const int b = static_cast<int>(e / d), c = static_cast<int>(e % d);
    float s = 0.0f;
    for (uint32_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      const float* f = df + static_cast<size_t>(k - first) * df_stride;
      s += f[d + c] - f[2 * d + c] + f[3 * d + c] * items[static_cast<size_t>(index[k]) * d + c];
    }
    d_target[static_cast<size_t>(b) * dt_stride + c] = s;
  }
}

__global__ void SoftmaxRowsKernel(const float* z, int z_stride, int rows, int k, float* g,
                                  int g_stride) {
  PS_ATT_GRID_LOOP(r, static_cast<size_t>(rows)) {
    const float* zr = z + r * z_stride;
    float* gr = g + r * g_stride;
    float top = zr[0];
    for (int e = 1; e < k; ++e) top = fmaxf(top, zr[e]);
    float sum = 0.0f;
    for (int e = 0; e < k; ++e) sum += (gr[e] = expf(zr[e] - top));
    for (int e = 0; e < k; ++e) gr[e] /= sum;
  }
}

__global__ void ExpertMixKernel(const float* g, int g_stride, const float* y, int y_stride,
                                int rows, int k, int width, float* out, int out_stride) {
  const size_t total = static_cast<size_t>(rows) * width;
  PS_ATT_GRID_LOOP(e, total) {
    const size_t r = e / width;
    const int c = static_cast<int>(e % width);
    float s = 0.0f;
    for (int x = 0; x < k; ++x) s += g[r * g_stride + x] * y[r * y_stride + x * width + c];
    out[r * out_stride + c] = s;
  }
}

__global__ void ExpertMixGateBackwardKernel(const float* g, int g_stride, const float* y,
                                            int y_stride, const float* d_out, int d_stride,
                                            int rows, int k, int width, float* dz,
                                            int dz_stride) {
  PS_ATT_GRID_LOOP(r, static_cast<size_t>(rows)) {
    const float* gr = g + r * g_stride;
    const float* d = d_out + r * d_stride;
    float* dzr = dz + r * dz_stride;
    float mean = 0.0f;
    for (int e = 0; e < k; ++e) {
      const float* ye = y + r * y_stride + static_cast<size_t>(e) * width;
      float dg = 0.0f;
      for (int c = 0; c < width; ++c) dg += d[c] * ye[c];
      dzr[e] = dg;
      mean += gr[e] * dg;
    }
    for (int e = 0; e < k; ++e) dzr[e] = gr[e] * (dzr[e] - mean);
  }
}

__global__ void ExpertMixInputBackwardKernel(const float* g, int g_stride, const float* d_out,
                                             int d_stride, int rows, int k, int width, float* dy,
                                             int dy_stride) {
  const size_t total = static_cast<size_t>(rows) * k * width;
  PS_ATT_GRID_LOOP(e, total) {
    const size_t r = e / (static_cast<size_t>(k) * width);
    const int x = static_cast<int>(e / width % k), c = static_cast<int>(e % width);
    dy[r * dy_stride + static_cast<size_t>(x) * width + c] = g[r * g_stride + x] * d_out[r * d_stride + c];
  }
}

}  // namespace

cudaError_t AttentionFeatures(const float* items, const uint32_t* index, const uint32_t* offsets,
                              int batch, uint32_t first, const float* target, int t_stride, int d,
                              float* features, int f_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  AttentionFeaturesKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      items, index, offsets, batch, first, target, t_stride, d, features, f_stride);
  return cudaGetLastError();
}

cudaError_t WeightedBagSum(const float* items, const uint32_t* index, const uint32_t* offsets,
                           int batch, uint32_t first, const float* scores, int d, float* out,
                           int out_stride, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * d;
  if (total == 0) return cudaSuccess;
  WeightedBagSumKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      items, index, offsets, batch, first, scores, d, out, out_stride);
  return cudaGetLastError();
}

cudaError_t WeightedBagDot(const float* d_out, int g_stride, const float* items,
                           const uint32_t* index, const uint32_t* offsets, int batch,
                           uint32_t first, int d, float* d_scores, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  WeightedBagDotKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      d_out, g_stride, items, index, offsets, batch, first, d, d_scores);
  return cudaGetLastError();
}

cudaError_t AttentionPoolingBackward(const float* d_out, int g_stride, const float* d_features,
                                     int df_stride, const float* items, const uint32_t* index,
                                     const uint32_t* offsets, int batch, uint32_t first,
                                     const float* scores, const float* target, int t_stride,
                                     int d, float* d_items, float* d_target, int dt_stride,
                                     cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  AttentionItemsBackwardKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      d_out, g_stride, d_features, df_stride, index, offsets, batch, first, scores, target,
      t_stride, d, d_items);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || d_target == nullptr) return err;
  const size_t total = static_cast<size_t>(batch) * d;
  AttentionTargetBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      d_features, df_stride, items, index, offsets, batch, first, d, d_target, dt_stride);
  return cudaGetLastError();
}

cudaError_t ExpertMixForward(const float* z, int z_stride, const float* y, int y_stride, int rows,
                             int k, int width, float* g, int g_stride, float* out, int out_stride,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  SoftmaxRowsKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(z, z_stride, rows, k, g, g_stride);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const size_t total = static_cast<size_t>(rows) * width;
  ExpertMixKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, g_stride, y, y_stride, rows, k,
                                                              width, out, out_stride);
  return cudaGetLastError();
}

cudaError_t ExpertMixBackward(const float* g, int g_stride, const float* y, int y_stride,
                              const float* d_out, int d_stride, int rows, int k, int width,
                              float* dz, int dz_stride, float* dy, int dy_stride,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  ExpertMixGateBackwardKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(
      g, g_stride, y, y_stride, d_out, d_stride, rows, k, width, dz, dz_stride);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const size_t total = static_cast<size_t>(rows) * k * width;
  ExpertMixInputBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      g, g_stride, d_out, d_stride, rows, k, width, dy, dy_stride);
  return cudaGetLastError();
}

}  // namespace pstrain::worker::nn::cuda_kernels
