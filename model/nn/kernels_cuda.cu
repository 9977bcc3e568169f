// The project's own CUDA kernels for the layers that are not matrix products
// (those go to cuBLAS): bias + activation, column sums, ReLU, embedding
// gather / scatter-add, the DLRM dot interaction and sigmoid + BCE.
#include "model/nn/kernels_cuda.h"

#include <algorithm>
#include <cstddef>

namespace pstrain::worker::nn::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr size_t kMaxSharedBytes = 48 * 1024;

int BlocksFor(size_t n) {
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + kThreads - 1) / kThreads,
                                                               kMaxBlocks)));
}

// Grid-stride loop over [0, n).
#define PS_GRID_LOOP(e, n)                                                    \
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       e < (n); e += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void BiasActivationKernel(float* y, int rows, int cols, int stride, const float* b,
                                     bool relu) {
  const size_t total = static_cast<size_t>(rows) * cols;
  PS_GRID_LOOP(e, total) {
    const int r = static_cast<int>(e / cols), c = static_cast<int>(e % cols);
    float* p = y + static_cast<size_t>(r) * stride + c;
    float v = *p + (b != nullptr ? b[c] : 0.0f);
    if (relu) v = v > 0.0f ? v : 0.0f;
    *p = v;
  }
}

__global__ void ReluMaskKernel(const float* y, int y_stride, const float* dy, int dy_stride,
                               float* dx, int dx_stride, int rows, int cols) {
  const size_t total = static_cast<size_t>(rows) * cols;
  PS_GRID_LOOP(e, total) {
    const size_t r = e / cols, c = e % cols;
    const float g = dy[r * dy_stride + c];
    dx[r * dx_stride + c] = y[r * y_stride + c] > 0.0f ? g : 0.0f;
  }
}

// out[c] (+)= sum_r m[r, c]. Block: 32 columns x 8 row groups.
__global__ void ColumnSumKernel(const float* m, int rows, int cols, int stride, bool accumulate,
                                float* out) {
  __shared__ float part[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols) {
    for (int r = threadIdx.y; r < rows; r += 8) s += m[static_cast<size_t>(r) * stride + c];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int g = 0; g < 8; ++g) total += part[g][threadIdx.x];
    out[c] = accumulate ? out[c] + total : total;
  }
}

__global__ void EmbeddingBagForwardKernel(const float* rows, const uint32_t* index,
                                          const uint32_t* offsets, int batch, int dim, bool mean,
                                          bool accumulate, float* out, int out_stride) {
  const size_t total = static_cast<size_t>(batch) * dim;
  PS_GRID_LOOP(e, total) {
    const int b = static_cast<int>(e / dim), k = static_cast<int>(e % dim);
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    float s = 0.0f;
    for (uint32_t j = begin; j < end; ++j) s += rows[static_cast<size_t>(index[j]) * dim + k];
    if (mean && end > begin) s /= static_cast<float>(end - begin);
    float* o = out + static_cast<size_t>(b) * out_stride + k;
    *o = accumulate ? *o + s : s;
  }
}

__global__ void EmbeddingBagBackwardKernel(const float* d_out, int d_out_stride,
                                           const uint32_t* index, const uint32_t* offsets,
                                           int batch, int dim, bool mean, float* d_rows) {
  const size_t total = static_cast<size_t>(batch) * dim;
  PS_GRID_LOOP(e, total) {
    const int b = static_cast<int>(e / dim), k = static_cast<int>(e % dim);
    const uint32_t begin = offsets[b], end = offsets[b + 1];
    if (end == begin) continue;
    float g = d_out[static_cast<size_t>(b) * d_out_stride + k];
    if (mean) g /= static_cast<float>(end - begin);
    for (uint32_t j = begin; j < end; ++j) {
      atomicAdd(d_rows + static_cast<size_t>(index[j]) * dim + k, g);
    }
  }
}

// Row i of pair p in the order (1,0), (2,0), (2,1), (3,0), ...
__device__ int PairRow(int p) {
  int i = static_cast<int>((1.0f + sqrtf(1.0f + 8.0f * static_cast<float>(p))) * 0.5f);
  while (i * (i - 1) / 2 > p) --i;
  while ((i + 1) * i / 2 <= p) ++i;
  return i;
}

// One block per sample; the sample's vectors are staged in shared memory.
__global__ void DotInteractionForwardKernel(const float* t, int t_stride, int n, int dim,
                                            float* z, int z_stride) {
  extern __shared__ float sh[];
  const int b = blockIdx.x;
  const float* tr = t + static_cast<size_t>(b) * t_stride;
  for (int e = threadIdx.x; e < n * dim; e += blockDim.x) sh[e] = tr[e];
  __syncthreads();
  float* zr = z + static_cast<size_t>(b) * z_stride;
  for (int e = threadIdx.x; e < dim; e += blockDim.x) zr[e] = sh[e];
  const int pairs = n * (n - 1) / 2;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int i = PairRow(p), j = p - i * (i - 1) / 2;
    float s = 0.0f;
    for (int k = 0; k < dim; ++k) s += sh[i * dim + k] * sh[j * dim + k];
    zr[dim + p] = s;
  }
}

__global__ void DotInteractionBackwardKernel(const float* t, int t_stride, const float* dz,
                                             int dz_stride, int n, int dim, float* dt,
                                             int dt_stride) {
  extern __shared__ float sh[];
  const int width = dim + n * (n - 1) / 2;
  float* sh_t = sh;
  float* sh_g = sh + n * dim;
  const int b = blockIdx.x;
  const float* tr = t + static_cast<size_t>(b) * t_stride;
  const float* gr = dz + static_cast<size_t>(b) * dz_stride;
  for (int e = threadIdx.x; e < n * dim; e += blockDim.x) sh_t[e] = tr[e];
  for (int e = threadIdx.x; e < width; e += blockDim.x) sh_g[e] = gr[e];
  __syncthreads();
  float* out = dt + static_cast<size_t>(b) * dt_stride;
  for (int e = threadIdx.x; e < n * dim; e += blockDim.x) {
    const int i = e / dim, k = e % dim;
    float acc = i == 0 ? sh_g[k] : 0.0f;
    for (int j = 0; j < i; ++j) acc += sh_g[dim + i * (i - 1) / 2 + j] * sh_t[j * dim + k];
    for (int j = i + 1; j < n; ++j) acc += sh_g[dim + j * (j - 1) / 2 + i] * sh_t[j * dim + k];
    out[e] = acc;
  }
}

__global__ void SigmoidBceKernel(const float* logits, const float* labels, int n,
                                 float* dlogits, double* loss_sum) {
  __shared__ double part[kThreads];
  double local = 0.0;
  PS_GRID_LOOP(i, static_cast<size_t>(n)) {
    const float z = logits[i], y = labels[i];
    const double zd = z;
    local += fmax(zd, 0.0) - zd * y + log1p(exp(-fabs(zd)));
    const float s = z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
    dlogits[i] = s - y;
  }
  part[threadIdx.x] = local;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(loss_sum, part[0]);
}

__global__ void SigmoidKernel(const float* logits, int n, float* probs) {
  PS_GRID_LOOP(i, static_cast<size_t>(n)) {
    const float z = logits[i];
    probs[i] = z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
  }
}

}  // namespace

cudaError_t BiasActivation(float* y, int rows, int cols, int stride, const float* b, bool relu,
                           cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  BiasActivationKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, rows, cols, stride, b, relu);
  return cudaGetLastError();
}

cudaError_t BiasActivationBackward(const float* y, int y_stride, float* dy, int dy_stride,
                                   int rows, int cols, bool relu, float* db, bool accumulate,
                                   cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (relu && total > 0) {
    ReluMaskKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, y_stride, dy, dy_stride, dy,
                                                               dy_stride, rows, cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (db != nullptr && cols > 0) {
    ColumnSumKernel<<<(cols + 31) / 32, dim3(32, 8), 0, stream>>>(dy, rows, cols, dy_stride,
                                                                  accumulate, db);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t Relu(const float* x, int x_stride, float* y, int y_stride, int rows, int cols,
                 cudaStream_t stream) {
  // max(x, 0) == x masked by (x > 0).
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  ReluMaskKernel<<<BlocksFor(total), kThreads, 0, stream>>>(x, x_stride, x, x_stride, y, y_stride,
                                                             rows, cols);
  return cudaGetLastError();
}

cudaError_t ReluBackward(const float* y, int y_stride, const float* dy, int dy_stride, float* dx,
                         int dx_stride, int rows, int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total == 0) return cudaSuccess;
  ReluMaskKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, y_stride, dy, dy_stride, dx,
                                                             dx_stride, rows, cols);
  return cudaGetLastError();
}

cudaError_t EmbeddingBagForward(const float* rows, const uint32_t* index, const uint32_t* offsets,
                                int batch, int dim, bool mean, bool accumulate, float* out,
                                int out_stride, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * dim;
  if (total == 0) return cudaSuccess;
  EmbeddingBagForwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      rows, index, offsets, batch, dim, mean, accumulate, out, out_stride);
  return cudaGetLastError();
}

cudaError_t EmbeddingBagBackward(const float* d_out, int d_out_stride, const uint32_t* index,
                                 const uint32_t* offsets, int batch, int dim, bool mean,
                                 float* d_rows, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * dim;
  if (total == 0) return cudaSuccess;
  EmbeddingBagBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
      d_out, d_out_stride, index, offsets, batch, dim, mean, d_rows);
  return cudaGetLastError();
}

cudaError_t DotInteractionForward(const float* t, int t_stride, int batch, int n, int dim,
                                  float* z, int z_stride, cudaStream_t stream) {
  const size_t shared = sizeof(float) * static_cast<size_t>(n) * dim;
  if (shared > kMaxSharedBytes) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  DotInteractionForwardKernel<<<batch, 128, shared, stream>>>(t, t_stride, n, dim, z, z_stride);
  return cudaGetLastError();
}

cudaError_t DotInteractionBackward(const float* t, int t_stride, const float* dz, int dz_stride,
                                   int batch, int n, int dim, float* dt, int dt_stride,
                                   cudaStream_t stream) {
  const size_t shared =
      sizeof(float) * (static_cast<size_t>(n) * dim + dim + static_cast<size_t>(n) * (n - 1) / 2);
  if (shared > kMaxSharedBytes) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  DotInteractionBackwardKernel<<<batch, 128, shared, stream>>>(t, t_stride, dz, dz_stride, n,
                                                               dim, dt, dt_stride);
  return cudaGetLastError();
}

cudaError_t SigmoidBce(const float* logits, const float* labels, int n, float* dlogits,
                       double* loss_sum, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(loss_sum, 0, sizeof(double), stream);
  if (err != cudaSuccess || n == 0) return err;
  SigmoidBceKernel<<<BlocksFor(n), kThreads, 0, stream>>>(logits, labels, n, dlogits, loss_sum);
  return cudaGetLastError();
}

cudaError_t Sigmoid(const float* logits, int n, float* probs, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SigmoidKernel<<<BlocksFor(n), kThreads, 0, stream>>>(logits, n, probs);
  return cudaGetLastError();
}

}  // namespace pstrain::worker::nn::cuda_kernels
