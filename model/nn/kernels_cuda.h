// Launchers of the project's own CUDA kernels (kernels_cuda.cu), used by
// CudaDevice. Each enqueues its kernel(s) on `stream` and returns the launch
// error (cudaSuccess when queued); shapes follow the CPU layer functions of
// the same names. Pointers are device pointers; views are passed as
// (pointer, stride) with explicit rows/cols.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pstrain::worker::nn::cuda_kernels {

// y = act(y + b) in place; b may be null.
cudaError_t BiasActivation(float* y, int rows, int cols, int stride, const float* b, bool relu,
                           cudaStream_t stream);
// dy = dy * (y > 0) when relu; then db (+)= column sums of dy when db != null.
cudaError_t BiasActivationBackward(const float* y, int y_stride, float* dy, int dy_stride,
                                   int rows, int cols, bool relu, float* db, bool accumulate,
                                   cudaStream_t stream);
// y = max(x, 0).
cudaError_t Relu(const float* x, int x_stride, float* y, int y_stride, int rows, int cols,
                 cudaStream_t stream);
// dx = dy * (y > 0).
cudaError_t ReluBackward(const float* y, int y_stride, const float* dy, int dy_stride, float* dx,
                         int dx_stride, int rows, int cols, cudaStream_t stream);
// out[b, :] (+)= pool of rows[index[k], :] over bag b.
cudaError_t EmbeddingBagForward(const float* rows, const uint32_t* index, const uint32_t* offsets,
                                int batch, int dim, bool mean, bool accumulate, float* out,
                                int out_stride, cudaStream_t stream);
// d_rows[index[k], :] += d_out[b, :] (/ bag size for mean), with atomicAdd.
cudaError_t EmbeddingBagBackward(const float* d_out, int d_out_stride, const uint32_t* index,
                                 const uint32_t* offsets, int batch, int dim, bool mean,
                                 float* d_rows, cudaStream_t stream);
// DLRM dot interaction (see interaction.h).
cudaError_t DotInteractionForward(const float* t, int t_stride, int batch, int n, int dim,
                                  float* z, int z_stride, cudaStream_t stream);
cudaError_t DotInteractionBackward(const float* t, int t_stride, const float* dz, int dz_stride,
                                   int batch, int n, int dim, float* dt, int dt_stride,
                                   cudaStream_t stream);
// dst += src.
cudaError_t AddMatrix(const float* src, int src_stride, float* dst, int dst_stride, int rows,
                      int cols, cudaStream_t stream);
// DCN-v2 cross combine (see feature_cross.h): out = x0 * u + xl; du = g * x0,
// dx0 (+)= g * u.
cudaError_t CrossCombineForward(const float* x0, int x0_stride, const float* u, int u_stride,
                                const float* xl, int xl_stride, float* out, int out_stride,
                                int rows, int cols, cudaStream_t stream);
cudaError_t CrossCombineBackward(const float* g, int g_stride, const float* x0, int x0_stride,
                                 const float* u, int u_stride, float* du, int du_stride,
                                 float* dx0, int dx0_stride, int rows, int cols, bool accumulate,
                                 cudaStream_t stream);
// FM second-order term (see feature_cross.h), one thread per row.
cudaError_t FmForward(const float* t, int t_stride, int batch, int n, int dim, bool accumulate,
                      float* out, int out_stride, cudaStream_t stream);
cudaError_t FmBackward(const float* t, int t_stride, const float* dy, int dy_stride, int batch,
                       int n, int dim, bool accumulate, float* dt, int dt_stride,
                       cudaStream_t stream);
// Inverted dropout and its backward (see dropout.h).
cudaError_t DropoutForward(float* y, int y_stride, int rows, int cols, float rate, uint64_t seed,
                           int64_t first_row, cudaStream_t stream);
cudaError_t DropoutBackward(const float* y, int y_stride, float* dy, int dy_stride, int rows,
                            int cols, float rate, cudaStream_t stream);
// DIN's attention pooling (attention_pooling.h; kernels_attention_cuda.cu):
// per-item rows are at k - first; d_target may be null.
cudaError_t AttentionFeatures(const float* items, const uint32_t* index, const uint32_t* offsets,
                              int batch, uint32_t first, const float* target, int t_stride, int d,
                              float* features, int f_stride, cudaStream_t stream);
cudaError_t WeightedBagSum(const float* items, const uint32_t* index, const uint32_t* offsets,
                           int batch, uint32_t first, const float* scores, int d, float* out,
                           int out_stride, cudaStream_t stream);
cudaError_t WeightedBagDot(const float* d_out, int g_stride, const float* items,
                           const uint32_t* index, const uint32_t* offsets, int batch,
                           uint32_t first, int d, float* d_scores, cudaStream_t stream);
cudaError_t AttentionPoolingBackward(const float* d_out, int g_stride, const float* d_features,
                                     int df_stride, const float* items, const uint32_t* index,
                                     const uint32_t* offsets, int batch, uint32_t first,
                                     const float* scores, const float* target, int t_stride,
                                     int d, float* d_items, float* d_target, int dt_stride,
                                     cudaStream_t stream);
// BST's self-attention (sequence_attention.h; kernels_sequence_cuda.cu):
// per-item rows are at k - first; hd = the width of a head.
// `target` / `d_target` null: no candidate appended (sequence_attention.h).
cudaError_t SequenceInputs(const float* items, const uint32_t* index, const uint32_t* offsets,
                           int batch, uint32_t first, const float* positions, int max_length,
                           const float* target, int target_stride, int d, float* x, int x_stride,
                           cudaStream_t stream);
cudaError_t SequenceInputsBackward(const float* dx, int dx_stride, const uint32_t* index,
                                   const uint32_t* offsets, int batch, uint32_t first,
                                   int max_length, int d, float* d_items, float* d_positions,
                                   float* d_target, int d_target_stride, cudaStream_t stream);
cudaError_t SequenceAttention(const float* q, int q_stride, const float* k, int k_stride,
                              const float* v, int v_stride, const uint32_t* offsets, int batch,
                              uint32_t first, int heads, int hd, int max_n, float* weights,
                              float* out, int out_stride, cudaStream_t stream);
cudaError_t SequenceAttentionBackward(const float* q, int q_stride, const float* k, int k_stride,
                                      const float* v, int v_stride, const float* weights,
                                      const float* d_out, int g_stride, const uint32_t* offsets,
                                      int batch, uint32_t first, int heads, int hd, int max_n,
                                      float* dq, int dq_stride, float* dk, int dk_stride,
                                      float* dv, int dv_stride, cudaStream_t stream);
cudaError_t SequenceMean(const float* y, int y_stride, const uint32_t* offsets, int batch,
                         uint32_t first, int d, float* out, int out_stride, cudaStream_t stream);
cudaError_t SequenceMeanBackward(const float* d_out, int g_stride, const uint32_t* offsets,
                                 int batch, uint32_t first, int d, float* dy, int dy_stride,
                                 cudaStream_t stream);
// Layer normalization of each row (layer_norm.h; kernels_norm_cuda.cu).
cudaError_t LayerNormForward(const float* x, int x_stride, int rows, int d, const float* gain,
                             const float* bias, float* y, int y_stride, float* stats,
                             cudaStream_t stream);
cudaError_t LayerNormBackward(const float* x, int x_stride, int rows, int d, const float* gain,
                              const float* stats, const float* dy, int dy_stride, float* dx,
                              int dx_stride, float* dgain, float* dbias, bool accumulate,
                              cudaStream_t stream);
// A gate's softmax mix of k experts of `width` (expert_mix.h).
cudaError_t ExpertMixForward(const float* z, int z_stride, const float* y, int y_stride, int rows,
                             int k, int width, float* g, int g_stride, float* out, int out_stride,
                             cudaStream_t stream);
cudaError_t ExpertMixBackward(const float* g, int g_stride, const float* y, int y_stride,
                              const float* d_out, int d_stride, int rows, int k, int width,
                              float* dz, int dz_stride, float* dy, int dy_stride,
                              cudaStream_t stream);
// dlogits = sigmoid(z) - y; *loss_sum (device, zeroed here) = sum of BCE.
cudaError_t SigmoidBce(const float* logits, const float* labels, int n, float* dlogits,
                       double* loss_sum, cudaStream_t stream);
cudaError_t Sigmoid(const float* logits, int n, float* probs, cudaStream_t stream);

}  // namespace pstrain::worker::nn::cuda_kernels
