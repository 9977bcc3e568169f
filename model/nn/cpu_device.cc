#include "model/nn/cpu_device.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/nn/attention_pooling.h"
#include "model/nn/blas.h"
#include "model/nn/concat.h"
#include "model/nn/dropout.h"
#include "model/nn/expert_mix.h"
#include "model/nn/feature_cross.h"
#include "model/nn/interaction.h"
#include "model/nn/layer_norm.h"
#include "model/nn/loss.h"
#include "model/nn/sequence_attention.h"

namespace pstrain::worker::nn {
namespace {

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  bool host_memory() const override { return true; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    void* p = std::aligned_alloc(kTensorAlignment, rounded == 0 ? kTensorAlignment : rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
    }
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status LinearForward(ConstMatrixView x, const float* w, const float* b, Activation act,
                             MatrixView y) override {
    nn::LinearForward(x, w, b, act, y);
    return absl::OkStatus();
  }
  absl::Status LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y,
                              Activation act, MatrixView dy, float* dw, float* db,
                              MatrixView dx, bool accumulate) override {
    nn::LinearBackward(x, w, y, act, dy, dw, db, dx, accumulate);
    return absl::OkStatus();
  }
  absl::Status ReluForward(ConstMatrixView x, MatrixView y) override {
    nn::ReluForward(x, y);
    return absl::OkStatus();
  }
  absl::Status ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx) override {
    nn::ReluBackward(y, dy, dx);
    return absl::OkStatus();
  }
  absl::Status EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling,
                                   bool accumulate, MatrixView out) override {
    nn::EmbeddingBagForward(rows, bags, pooling, accumulate, out);
    return absl::OkStatus();
  }
  absl::Status EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags, Pooling pooling,
                                    float* d_rows) override {
    nn::EmbeddingBagBackward(d_out, bags, pooling, d_rows);
    return absl::OkStatus();
  }
  absl::Status DotInteractionForward(ConstMatrixView t, int n, int dim, MatrixView z) override {
    nn::DotInteractionForward(t, n, dim, z);
    return absl::OkStatus();
  }
  absl::Status DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n, int dim,
                                      MatrixView dt) override {
    nn::DotInteractionBackward(t, dz, n, dim, dt);
    return absl::OkStatus();
  }
  absl::Status CopyMatrix(ConstMatrixView src, MatrixView dst) override {
    nn::CopyMatrix(src, dst);
    return absl::OkStatus();
  }
  absl::Status AddMatrix(ConstMatrixView src, MatrixView dst) override {
    nn::AddMatrix(src, dst);
    return absl::OkStatus();
  }
  absl::Status CrossCombineForward(ConstMatrixView x0, ConstMatrixView u, ConstMatrixView xl,
                                   MatrixView out) override {
    nn::CrossCombineForward(x0, u, xl, out);
    return absl::OkStatus();
  }
  absl::Status CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0, ConstMatrixView u,
                                    MatrixView du, MatrixView dx0, bool accumulate) override {
    nn::CrossCombineBackward(g, x0, u, du, dx0, accumulate);
    return absl::OkStatus();
  }
  absl::Status AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                                 ConstMatrixView target, MatrixView features) override {
    nn::AttentionFeatures(items, bags, first, target, features);
    return absl::OkStatus();
  }
  absl::Status WeightedBagSum(const float* items, const Bags& bags, uint32_t first,
                              const float* scores, MatrixView out) override {
    nn::WeightedBagSum(items, bags, first, scores, out);
    return absl::OkStatus();
  }
  absl::Status WeightedBagDot(ConstMatrixView d_out, const float* items, const Bags& bags,
                              uint32_t first, float* d_scores) override {
    nn::WeightedBagDot(d_out, items, bags, first, d_scores);
    return absl::OkStatus();
  }
  absl::Status AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                                        const float* items, const Bags& bags, uint32_t first,
                                        const float* scores, ConstMatrixView target,
                                        float* d_items, MatrixView d_target) override {
    nn::AttentionPoolingBackward(d_out, d_features, items, bags, first, scores, target, d_items,
                                 d_target);
    return absl::OkStatus();
  }
  absl::Status SequenceInputs(const float* items, const Bags& bags, uint32_t first,
                              const float* positions, int max_length, ConstMatrixView target,
                              MatrixView x) override {
    nn::SequenceInputs(items, bags, first, positions, max_length, target, x);
    return absl::OkStatus();
  }
  absl::Status SequenceInputsBackward(ConstMatrixView dx, const Bags& bags, uint32_t first,
                                      int max_length, float* d_items, float* d_positions,
                                      MatrixView d_target) override {
    nn::SequenceInputsBackward(dx, bags, first, max_length, d_items, d_positions, d_target);
    return absl::OkStatus();
  }
  absl::Status SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                 const Bags& bags, uint32_t first, int heads, int max_n,
                                 float* weights, MatrixView out) override {
    nn::SequenceAttention(q, k, v, bags, first, heads, max_n, weights, out);
    return absl::OkStatus();
  }
  absl::Status SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                         const float* weights, ConstMatrixView d_out,
                                         const Bags& bags, uint32_t first, int heads, int max_n,
                                         MatrixView dq, MatrixView dk, MatrixView dv) override {
    nn::SequenceAttentionBackward(q, k, v, weights, d_out, bags, first, heads, max_n, dq, dk, dv);
    return absl::OkStatus();
  }
  absl::Status SequenceMean(ConstMatrixView y, const Bags& bags, uint32_t first,
                            MatrixView out) override {
    nn::SequenceMean(y, bags, first, out);
    return absl::OkStatus();
  }
  absl::Status SequenceMeanBackward(ConstMatrixView d_out, const Bags& bags, uint32_t first,
                                    MatrixView dy) override {
    nn::SequenceMeanBackward(d_out, bags, first, dy);
    return absl::OkStatus();
  }
  absl::Status LayerNormForward(ConstMatrixView x, const float* gain, const float* bias,
                                MatrixView y, float* stats) override {
    nn::LayerNormForward(x, gain, bias, y, stats);
    return absl::OkStatus();
  }
  absl::Status LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                                 ConstMatrixView dy, MatrixView dx, float* dgain, float* dbias,
                                 bool accumulate) override {
    nn::LayerNormBackward(x, gain, stats, dy, dx, dgain, dbias, accumulate);
    return absl::OkStatus();
  }
  absl::Status ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g,
                                MatrixView out) override {
    nn::ExpertMixForward(z, y, g, out);
    return absl::OkStatus();
  }
  absl::Status ExpertMixBackward(ConstMatrixView g, ConstMatrixView y, ConstMatrixView d_out,
                                 MatrixView dz, MatrixView dy) override {
    nn::ExpertMixBackward(g, y, d_out, dz, dy);
    return absl::OkStatus();
  }
  absl::Status DropoutForward(MatrixView y, float rate, uint64_t seed,
                              int64_t first_row) override {
    nn::DropoutForward(y, rate, seed, first_row);
    return absl::OkStatus();
  }
  absl::Status DropoutBackward(ConstMatrixView y, MatrixView dy, float rate) override {
    nn::DropoutBackward(y, dy, rate);
    return absl::OkStatus();
  }
  absl::Status FmForward(ConstMatrixView t, int n, int dim, bool accumulate,
                         MatrixView out) override {
    nn::FmForward(t, n, dim, accumulate, out);
    return absl::OkStatus();
  }
  absl::Status FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim, bool accumulate,
                          MatrixView dt) override {
    nn::FmBackward(t, dy, n, dim, accumulate, dt);
    return absl::OkStatus();
  }
  absl::StatusOr<double> SigmoidBceLoss(const float* logits, const float* labels, int n,
                                        float* dlogits) override {
    return nn::SigmoidBceLoss(logits, labels, n, dlogits);
  }
  absl::Status Sigmoid(const float* logits, int n, float* probs) override {
    nn::Sigmoid(logits, n, probs);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Device> CreateCpuDevice() {
  UseSingleThreadedBlas();
  return std::make_unique<CpuDevice>();
}

}  // namespace pstrain::worker::nn
