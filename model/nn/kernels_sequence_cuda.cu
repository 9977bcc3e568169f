// CUDA kernels of BST's self-attention over a sequence (sequence_attention.h).
// Each bag (row) gets one block; its threads stride over the bag's items x
// dim (inputs, mean) or items x heads (attention: a thread computes one
// item's softmax over the bag, which is short: a history of tens of items).
// Gradients into shared embedding and position rows use atomicAdd.
#include <algorithm>
#include <cstddef>

#include "model/nn/kernels_cuda.h"

namespace pstrain::worker::nn::cuda_kernels {
namespace {

constexpr int kBagThreads = 128;
constexpr int kMaxBlocks = 4096;

int BagBlocks(int batch) { return std::max(1, std::min(batch, kMaxBlocks)); }

#define PS_SEQ_BAG_LOOP(b, batch) for (int b = blockIdx.x; b < (batch); b += gridDim.x)

__device__ int Position(int i, int n, int max_length) {
  const int p = n - 1 - i;
  return p < max_length - 1 ? p : max_length - 1;
}

__global__ void SequenceInputsKernel(const float* items, const uint32_t* index,
                                     const uint32_t* offsets, int batch, uint32_t first,
                                     const float* positions, int max_length, const float* target,
                                     int target_stride, int d, float* x, int x_stride) {
  PS_SEQ_BAG_LOOP(b, batch) {
    const uint32_t begin = offsets[b];
    const int n = static_cast<int>(offsets[b + 1] - begin);
    const int shift = target != nullptr ? b : 0, of = target != nullptr ? n + 1 : n;
    for (size_t e = threadIdx.x; e < static_cast<size_t>(of) * d; e += blockDim.x) {
      const int i = static_cast<int>(e / d), c = static_cast<int>(e % d);
      const uint32_t k = begin + i;
      const float h = i < n ? items[static_cast<size_t>(index[k]) * d + c]
                            : target[static_cast<size_t>(b) * target_stride + c];
      x[static_cast<size_t>(k - first + shift) * x_stride + c] =
          h + positions[static_cast<size_t>(Position(i, of, max_length)) * d + c];
    }
  }
}

__global__ void SequenceInputsBackwardKernel(const float* dx, int dx_stride,
                                             const uint32_t* index, const uint32_t* offsets,
                                             int batch, uint32_t first, int max_length, int d,
                                             float* d_items, float* d_positions, float* d_target,
                                             int d_target_stride) {
  PS_SEQ_BAG_LOOP(b, batch) {
    const uint32_t begin = offsets[b];
    const int n = static_cast<int>(offsets[b + 1] - begin);
    const int shift = d_target != nullptr ? b : 0, of = d_target != nullptr ? n + 1 : n;
    for (size_t e = threadIdx.x; e < static_cast<size_t>(of) * d; e += blockDim.x) {
      const int i = static_cast<int>(e / d), c = static_cast<int>(e % d);
      const uint32_t k = begin + i;
      const float g = dx[static_cast<size_t>(k - first + shift) * dx_stride + c];
      if (i < n) {
        atomicAdd(&d_items[static_cast<size_t>(index[k]) * d + c], g);
      } else {
        d_target[static_cast<size_t>(b) * d_target_stride + c] = g;
      }
      atomicAdd(&d_positions[static_cast<size_t>(Position(i, of, max_length)) * d + c], g);
    }
  }
}

// One thread per (item i, head h) of a bag: its softmax over the bag's
// items (into `weights`) and its head's slice of out.
__global__ void SequenceAttentionKernel(const float* q, int q_stride, const float* k,
                                        int k_stride, const float* v, int v_stride,
                                        const uint32_t* offsets, int batch, uint32_t first,
                                        int heads, int hd, int max_n, float* weights, float* out,
                                        int out_stride) {
  const float scale = rsqrtf(static_cast<float>(hd));
  PS_SEQ_BAG_LOOP(b, batch) {
    const int g0 = static_cast<int>(offsets[b] - first);
    const int n = static_cast<int>(offsets[b + 1] - offsets[b]);
    for (int e = threadIdx.x; e < n * heads; e += blockDim.x) {
      const int i = e / heads, h = e % heads, c0 = h * hd;
      const float* qi = q + static_cast<size_t>(g0 + i) * q_stride + c0;
      float* a = weights + (static_cast<size_t>(g0 + i) * heads + h) * max_n;
      float top = -INFINITY;
      for (int j = 0; j < n; ++j) {
        const float* kj = k + static_cast<size_t>(g0 + j) * k_stride + c0;
        float s = 0.0f;
        for (int c = 0; c < hd; ++c) s += qi[c] * kj[c];
        a[j] = s * scale;
        top = fmaxf(top, a[j]);
      }
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += (a[j] = expf(a[j] - top));
      const float inv = 1.0f / sum;
      float* o = out + static_cast<size_t>(g0 + i) * out_stride + c0;
      for (int c = 0; c < hd; ++c) o[c] = 0.0f;
      for (int j = 0; j < n; ++j) {
        a[j] *= inv;
        const float* vj = v + static_cast<size_t>(g0 + j) * v_stride + c0;
        for (int c = 0; c < hd; ++c) o[c] += a[j] * vj[c];
      }
    }
  }
}

// In three phases per bag, without atomics: (1) each (i, h) thread keeps
// dot_i = sum_j a_ij <g_i, v_j> in the first float of dq's (i, h) slice;
// (2) each (j, h) thread sums dv_j = sum_i a_ij g_i and dk_j = sum_i ds_ij
// q_i, ds_ij = a_ij (<g_i, v_j> - dot_i) / sqrt(hd); (3) each (i, h) thread
// writes dq_i = sum_j ds_ij k_j over its slice.
__global__ void SequenceAttentionBackwardKernel(
    const float* q, int q_stride, const float* k, int k_stride, const float* v, int v_stride,
    const float* weights, const float* d_out, int g_stride, const uint32_t* offsets, int batch,
    uint32_t first, int heads, int hd, int max_n, float* dq, int dq_stride, float* dk,
    int dk_stride, float* dv, int dv_stride) {
  const float scale = rsqrtf(static_cast<float>(hd));
  PS_SEQ_BAG_LOOP(b, batch) {
    const int g0 = static_cast<int>(offsets[b] - first);
    const int n = static_cast<int>(offsets[b + 1] - offsets[b]);
    for (int e = threadIdx.x; e < n * heads; e += blockDim.x) {
      const int i = e / heads, h = e % heads, c0 = h * hd;
      const float* a = weights + (static_cast<size_t>(g0 + i) * heads + h) * max_n;
      const float* g = d_out + static_cast<size_t>(g0 + i) * g_stride + c0;
      float dot = 0.0f;
      for (int j = 0; j < n; ++j) {
        const float* vj = v + static_cast<size_t>(g0 + j) * v_stride + c0;
        float s = 0.0f;
        for (int c = 0; c < hd; ++c) s += g[c] * vj[c];
        dot += a[j] * s;
      }
      dq[static_cast<size_t>(g0 + i) * dq_stride + c0] = dot;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * heads; e += blockDim.x) {
      const int j = e / heads, h = e % heads, c0 = h * hd;
      const float* vj = v + static_cast<size_t>(g0 + j) * v_stride + c0;
      float* dvj = dv + static_cast<size_t>(g0 + j) * dv_stride + c0;
      float* dkj = dk + static_cast<size_t>(g0 + j) * dk_stride + c0;
      for (int c = 0; c < hd; ++c) dvj[c] = dkj[c] = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float a = weights[(static_cast<size_t>(g0 + i) * heads + h) * max_n + j];
        const float* g = d_out + static_cast<size_t>(g0 + i) * g_stride + c0;
        const float* qi = q + static_cast<size_t>(g0 + i) * q_stride + c0;
        const float dot = dq[static_cast<size_t>(g0 + i) * dq_stride + c0];
        float s = 0.0f;
        for (int c = 0; c < hd; ++c) s += g[c] * vj[c];
        const float ds = a * (s - dot) * scale;
        for (int c = 0; c < hd; ++c) {
          dvj[c] += a * g[c];
          dkj[c] += ds * qi[c];
        }
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * heads; e += blockDim.x) {
      const int i = e / heads, h = e % heads, c0 = h * hd;
      const float* a = weights + (static_cast<size_t>(g0 + i) * heads + h) * max_n;
      const float* g = d_out + static_cast<size_t>(g0 + i) * g_stride + c0;
      float* dqi = dq + static_cast<size_t>(g0 + i) * dq_stride + c0;
      const float dot = dqi[0];
      for (int c = 0; c < hd; ++c) dqi[c] = 0.0f;
      for (int j = 0; j < n; ++j) {
        const float* vj = v + static_cast<size_t>(g0 + j) * v_stride + c0;
        const float* kj = k + static_cast<size_t>(g0 + j) * k_stride + c0;
        float s = 0.0f;
        for (int c = 0; c < hd; ++c) s += g[c] * vj[c];
        const float ds = a[j] * (s - dot) * scale;
        for (int c = 0; c < hd; ++c) dqi[c] += ds * kj[c];
      }
    }
    __syncthreads();
  }
}

__global__ void SequenceMeanKernel(const float* y, int y_stride, const uint32_t* offsets,
                                   int batch, uint32_t first, int d, float* out, int out_stride) {
  PS_SEQ_BAG_LOOP(b, batch) {
    const int g0 = static_cast<int>(offsets[b] - first);
    const int n = static_cast<int>(offsets[b + 1] - offsets[b]);
    const float inv = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
      float s = 0.0f;
      for (int i = 0; i < n; ++i) s += y[static_cast<size_t>(g0 + i) * y_stride + c] * inv;
      out[static_cast<size_t>(b) * out_stride + c] = s;
    }
  }
}

__global__ void SequenceMeanBackwardKernel(const float* d_out, int g_stride,
                                           const uint32_t* offsets, int batch, uint32_t first,
                                           int d, float* dy, int dy_stride) {
  PS_SEQ_BAG_LOOP(b, batch) {
    const int g0 = static_cast<int>(offsets[b] - first);
    const int n = static_cast<int>(offsets[b + 1] - offsets[b]);
    if (n == 0) continue;
    const float inv = 1.0f / static_cast<float>(n);
    for (size_t e = threadIdx.x; e < static_cast<size_t>(n) * d; e += blockDim.x) {
      const int i = static_cast<int>(e / d), c = static_cast<int>(e % d);
      dy[static_cast<size_t>(g0 + i) * dy_stride + c] =
          d_out[static_cast<size_t>(b) * g_stride + c] * inv;
    }
  }
}

}  // namespace

cudaError_t SequenceInputs(const float* items, const uint32_t* index, const uint32_t* offsets,
                           int batch, uint32_t first, const float* positions, int max_length,
                           const float* target, int target_stride, int d, float* x, int x_stride,
                           cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceInputsKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      items, index, offsets, batch, first, positions, max_length, target, target_stride, d, x,
      x_stride);
  return cudaGetLastError();
}

cudaError_t SequenceInputsBackward(const float* dx, int dx_stride, const uint32_t* index,
                                   const uint32_t* offsets, int batch, uint32_t first,
                                   int max_length, int d, float* d_items, float* d_positions,
                                   float* d_target, int d_target_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceInputsBackwardKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      dx, dx_stride, index, offsets, batch, first, max_length, d, d_items, d_positions, d_target,
      d_target_stride);
  return cudaGetLastError();
}

cudaError_t SequenceAttention(const float* q, int q_stride, const float* k, int k_stride,
                              const float* v, int v_stride, const uint32_t* offsets, int batch,
                              uint32_t first, int heads, int hd, int max_n, float* weights,
                              float* out, int out_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceAttentionKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      q, q_stride, k, k_stride, v, v_stride, offsets, batch, first, heads, hd, max_n, weights,
      out, out_stride);
  return cudaGetLastError();
}

cudaError_t SequenceAttentionBackward(const float* q, int q_stride, const float* k, int k_stride,
                                      const float* v, int v_stride, const float* weights,
                                      const float* d_out, int g_stride, const uint32_t* offsets,
                                      int batch, uint32_t first, int heads, int hd, int max_n,
                                      float* dq, int dq_stride, float* dk, int dk_stride,
                                      float* dv, int dv_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceAttentionBackwardKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      q, q_stride, k, k_stride, v, v_stride, weights, d_out, g_stride, offsets, batch, first,
      heads, hd, max_n, dq, dq_stride, dk, dk_stride, dv, dv_stride);
  return cudaGetLastError();
}

cudaError_t SequenceMean(const float* y, int y_stride, const uint32_t* offsets, int batch,
                         uint32_t first, int d, float* out, int out_stride, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceMeanKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(y, y_stride, offsets, batch,
                                                                   first, d, out, out_stride);
  return cudaGetLastError();
}

cudaError_t SequenceMeanBackward(const float* d_out, int g_stride, const uint32_t* offsets,
                                 int batch, uint32_t first, int d, float* dy, int dy_stride,
                                 cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SequenceMeanBackwardKernel<<<BagBlocks(batch), kBagThreads, 0, stream>>>(
      d_out, g_stride, offsets, batch, first, d, dy, dy_stride);
  return cudaGetLastError();
}

}  // namespace pstrain::worker::nn::cuda_kernels
