// CudaDevice: the Device interface on one CUDA GPU. Matrix products go to
// cuBLAS (FP32, no TF32, so results match the CPU path to ~1e-5 relative);
// everything else to the kernels in kernels_cuda.cu. All work is queued on one
// stream owned by the device; CopyToHost and the loss wait for it.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/nn/cuda_check_cuda.h"
#include "model/nn/device.h"
#include "model/nn/kernels_cuda.h"

namespace pstrain::worker::nn {
namespace {

cublasOperation_t ToCublas(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}
  ~CudaDevice() override {
    // Best effort: errors while tearing down cannot be reported.
    if (loss_sum_ != nullptr) cudaFree(loss_sum_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    PS_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    PS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    PS_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
    PS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
    // Plain FP32 products: TF32 would break the 1e-4 agreement with the CPU.
    PS_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    PS_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&loss_sum_), sizeof(double)));
    return absl::OkStatus();
  }

  std::string name() const override { return absl::StrCat("cuda:", ordinal_); }
  bool host_memory() const override { return false; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    PS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
  }
  void Free(void* ptr) override { cudaFree(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    // From pageable memory this returns once `src` has been staged.
    PS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) {
      PS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    }
    PS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    PS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    PS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::Status LinearForward(ConstMatrixView x, const float* w, const float* b, Activation act,
                             MatrixView y) override {
    const int batch = x.rows, in = x.cols, out = y.cols;
    if (batch == 0 || out == 0) return absl::OkStatus();
    // y[B x out] = x[B x in] W^T.
    PS_RETURN_IF_ERROR(Gemm(false, true, batch, out, in, x.data, x.stride, w, in, 0.0f, y.data,
                            y.stride));
    if (b == nullptr && act == Activation::kNone) return absl::OkStatus();
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::BiasActivation(
        y.data, y.rows, y.cols, y.stride, b, act == Activation::kRelu, stream_));
    return absl::OkStatus();
  }

  absl::Status LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y,
                              Activation act, MatrixView dy, float* dw, float* db,
                              MatrixView dx, bool accumulate) override {
    const int batch = x.rows, in = x.cols, out = dy.cols;
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::BiasActivationBackward(
        y.data, y.stride, dy.data, dy.stride, dy.rows, dy.cols, act == Activation::kRelu, db,
        accumulate, stream_));
    // dW[out x in] (+)= dy^T x.
    PS_RETURN_IF_ERROR(Gemm(true, false, out, in, batch, dy.data, dy.stride, x.data, x.stride,
                            accumulate ? 1.0f : 0.0f, dw, in));
    // dx[B x in] = dy W.
    if (dx.data != nullptr) {
      PS_RETURN_IF_ERROR(Gemm(false, false, batch, in, out, dy.data, dy.stride, w, in, 0.0f,
                              dx.data, dx.stride));
    }
    return absl::OkStatus();
  }

  absl::Status ReluForward(ConstMatrixView x, MatrixView y) override {
    PS_CUDA_RETURN_IF_ERROR(
        cuda_kernels::Relu(x.data, x.stride, y.data, y.stride, x.rows, x.cols, stream_));
    return absl::OkStatus();
  }
  absl::Status ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::ReluBackward(y.data, y.stride, dy.data, dy.stride,
                                                       dx.data, dx.stride, y.rows, y.cols,
                                                       stream_));
    return absl::OkStatus();
  }
  absl::Status EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling,
                                   bool accumulate, MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::EmbeddingBagForward(
        rows, bags.index, bags.offsets, bags.batch, out.cols, pooling == Pooling::kMean,
        accumulate, out.data, out.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags, Pooling pooling,
                                    float* d_rows) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::EmbeddingBagBackward(
        d_out.data, d_out.stride, bags.index, bags.offsets, bags.batch, d_out.cols,
        pooling == Pooling::kMean, d_rows, stream_));
    return absl::OkStatus();
  }
  absl::Status DotInteractionForward(ConstMatrixView t, int n, int dim, MatrixView z) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::DotInteractionForward(t.data, t.stride, t.rows, n, dim,
                                                                z.data, z.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n, int dim,
                                      MatrixView dt) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::DotInteractionBackward(
        t.data, t.stride, dz.data, dz.stride, t.rows, n, dim, dt.data, dt.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyMatrix(ConstMatrixView src, MatrixView dst) override {
    if (src.empty()) return absl::OkStatus();
    PS_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        dst.data, sizeof(float) * dst.stride, src.data, sizeof(float) * src.stride,
        sizeof(float) * src.cols, src.rows, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status AddMatrix(ConstMatrixView src, MatrixView dst) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::AddMatrix(src.data, src.stride, dst.data, dst.stride,
                                                    dst.rows, dst.cols, stream_));
    return absl::OkStatus();
  }
  absl::Status CrossCombineForward(ConstMatrixView x0, ConstMatrixView u, ConstMatrixView xl,
                                   MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::CrossCombineForward(
        x0.data, x0.stride, u.data, u.stride, xl.data, xl.stride, out.data, out.stride, out.rows,
        out.cols, stream_));
    return absl::OkStatus();
  }
  absl::Status CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0, ConstMatrixView u,
                                    MatrixView du, MatrixView dx0, bool accumulate) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::CrossCombineBackward(
        g.data, g.stride, x0.data, x0.stride, u.data, u.stride, du.data, du.stride, dx0.data,
        dx0.stride, du.rows, du.cols, accumulate, stream_));
    return absl::OkStatus();
  }
  absl::Status AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                                 ConstMatrixView target, MatrixView features) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::AttentionFeatures(
        items, bags.index, bags.offsets, bags.batch, first, target.data, target.stride,
        target.cols, features.data, features.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status WeightedBagSum(const float* items, const Bags& bags, uint32_t first,
                              const float* scores, MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::WeightedBagSum(items, bags.index, bags.offsets,
                                                         bags.batch, first, scores, out.cols,
                                                         out.data, out.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status WeightedBagDot(ConstMatrixView d_out, const float* items, const Bags& bags,
                              uint32_t first, float* d_scores) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::WeightedBagDot(d_out.data, d_out.stride, items,
                                                         bags.index, bags.offsets, bags.batch,
                                                         first, d_out.cols, d_scores, stream_));
    return absl::OkStatus();
  }
  absl::Status AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                                        const float* items, const Bags& bags, uint32_t first,
                                        const float* scores, ConstMatrixView target,
                                        float* d_items, MatrixView d_target) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::AttentionPoolingBackward(
        d_out.data, d_out.stride, d_features.data, d_features.stride, items, bags.index,
        bags.offsets, bags.batch, first, scores, target.data, target.stride, d_out.cols, d_items,
        d_target.data, d_target.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceInputs(const float* items, const Bags& bags, uint32_t first,
                              const float* positions, int max_length, ConstMatrixView target,
                              MatrixView x) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceInputs(
        items, bags.index, bags.offsets, bags.batch, first, positions, max_length, target.data,
        target.stride, x.cols, x.data, x.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceInputsBackward(ConstMatrixView dx, const Bags& bags, uint32_t first,
                                      int max_length, float* d_items, float* d_positions,
                                      MatrixView d_target) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceInputsBackward(
        dx.data, dx.stride, bags.index, bags.offsets, bags.batch, first, max_length, dx.cols,
        d_items, d_positions, d_target.data, d_target.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                 const Bags& bags, uint32_t first, int heads, int max_n,
                                 float* weights, MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceAttention(
        q.data, q.stride, k.data, k.stride, v.data, v.stride, bags.offsets, bags.batch, first,
        heads, q.cols / heads, max_n, weights, out.data, out.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                         const float* weights, ConstMatrixView d_out,
                                         const Bags& bags, uint32_t first, int heads, int max_n,
                                         MatrixView dq, MatrixView dk, MatrixView dv) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceAttentionBackward(
        q.data, q.stride, k.data, k.stride, v.data, v.stride, weights, d_out.data, d_out.stride,
        bags.offsets, bags.batch, first, heads, q.cols / heads, max_n, dq.data, dq.stride,
        dk.data, dk.stride, dv.data, dv.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceMean(ConstMatrixView y, const Bags& bags, uint32_t first,
                            MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceMean(y.data, y.stride, bags.offsets, bags.batch,
                                                       first, out.cols, out.data, out.stride,
                                                       stream_));
    return absl::OkStatus();
  }
  absl::Status SequenceMeanBackward(ConstMatrixView d_out, const Bags& bags, uint32_t first,
                                    MatrixView dy) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::SequenceMeanBackward(d_out.data, d_out.stride,
                                                               bags.offsets, bags.batch, first,
                                                               dy.cols, dy.data, dy.stride,
                                                               stream_));
    return absl::OkStatus();
  }
  absl::Status LayerNormForward(ConstMatrixView x, const float* gain, const float* bias,
                                MatrixView y, float* stats) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::LayerNormForward(x.data, x.stride, x.rows, x.cols, gain,
                                                           bias, y.data, y.stride, stats, stream_));
    return absl::OkStatus();
  }
  absl::Status LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                                 ConstMatrixView dy, MatrixView dx, float* dgain, float* dbias,
                                 bool accumulate) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::LayerNormBackward(
        x.data, x.stride, x.rows, x.cols, gain, stats, dy.data, dy.stride, dx.data, dx.stride,
        dgain, dbias, accumulate, stream_));
    return absl::OkStatus();
  }
  absl::Status ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g,
                                MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::ExpertMixForward(z.data, z.stride, y.data, y.stride,
                                                           z.rows, z.cols, out.cols, g.data,
                                                           g.stride, out.data, out.stride,
                                                           stream_));
    return absl::OkStatus();
  }
  absl::Status ExpertMixBackward(ConstMatrixView g, ConstMatrixView y, ConstMatrixView d_out,
                                 MatrixView dz, MatrixView dy) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::ExpertMixBackward(
        g.data, g.stride, y.data, y.stride, d_out.data, d_out.stride, g.rows, g.cols, d_out.cols,
        dz.data, dz.stride, dy.data, dy.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status DropoutForward(MatrixView y, float rate, uint64_t seed,
                              int64_t first_row) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::DropoutForward(y.data, y.stride, y.rows, y.cols, rate,
                                                         seed, first_row, stream_));
    return absl::OkStatus();
  }
  absl::Status DropoutBackward(ConstMatrixView y, MatrixView dy, float rate) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::DropoutBackward(y.data, y.stride, dy.data, dy.stride,
                                                          dy.rows, dy.cols, rate, stream_));
    return absl::OkStatus();
  }
  absl::Status FmForward(ConstMatrixView t, int n, int dim, bool accumulate,
                         MatrixView out) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::FmForward(t.data, t.stride, t.rows, n, dim, accumulate,
                                                    out.data, out.stride, stream_));
    return absl::OkStatus();
  }
  absl::Status FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim, bool accumulate,
                          MatrixView dt) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::FmBackward(t.data, t.stride, dy.data, dy.stride, t.rows,
                                                     n, dim, accumulate, dt.data, dt.stride,
                                                     stream_));
    return absl::OkStatus();
  }
  absl::StatusOr<double> SigmoidBceLoss(const float* logits, const float* labels, int n,
                                        float* dlogits) override {
    PS_CUDA_RETURN_IF_ERROR(
        cuda_kernels::SigmoidBce(logits, labels, n, dlogits, loss_sum_, stream_));
    double loss = 0.0;
    PS_RETURN_IF_ERROR(CopyToHost(&loss, loss_sum_, sizeof(double)));
    return loss;
  }
  absl::Status Sigmoid(const float* logits, int n, float* probs) override {
    PS_CUDA_RETURN_IF_ERROR(cuda_kernels::Sigmoid(logits, n, probs, stream_));
    return absl::OkStatus();
  }

 private:
  // Row-major C[m x n] = op(A)[m x k] op(B)[k x n] + beta C. A row-major
  // matrix is its column-major transpose, so cuBLAS computes
  // C^T = op(B)^T op(A)^T + beta C^T.
  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
    if (m == 0 || n == 0) return absl::OkStatus();
    const float one = 1.0f;
    if (k == 0) {
      if (beta == 0.0f) {
        PS_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(c, sizeof(float) * ldc, 0, sizeof(float) * n,
                                                  m, stream_));
      }
      return absl::OkStatus();
    }
    PS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas_, ToCublas(trans_b), ToCublas(trans_a), n, m, k,
                                          &one, b, ldb, a, lda, &beta, c, ldc));
    return absl::OkStatus();
  }

  const int ordinal_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  double* loss_sum_ = nullptr;  // device scalar for the loss reduction
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cuda: no usable GPU: cudaGetDeviceCount: ",
                                               cudaGetErrorString(err)));
  }
  if (ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("cuda: device ", ordinal, " requested but ", count, " present"));
  }
  auto device = std::make_unique<CudaDevice>(ordinal);
  PS_RETURN_IF_ERROR(device->Init());
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace pstrain::worker::nn
