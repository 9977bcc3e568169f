// Device: where the layer math runs (the host CPU or a CUDA GPU), behind one
// interface so that the models are written once. Every op mirrors the CPU
// function of the same name in linear.h, embedding_bag.h, interaction.h,
// concat.h, feature_cross.h, attention_pooling.h, expert_mix.h, dropout.h and loss.h; all pointers and views passed to ops are device
// pointers (plain host pointers when host_memory()). Ops may run
// asynchronously in issue order; CopyToHost, SigmoidBceLoss and Synchronize
// wait for them. Errors (a device fault, out of memory, a shape the device
// cannot handle) come back as Status. Owned by one model; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/linear.h"
#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

class Device {
 public:
  virtual ~Device() = default;

  // "cpu" or "cuda:<ordinal>".
  virtual std::string name() const = 0;
  // True when device memory is host memory: host data needs no copies.
  virtual bool host_memory() const = 0;

  // ---- memory ----
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Copies host `src` into device `dst`; `src` may be reused on return.
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Waits for the ops issued so far, then copies device `src` to host `dst`.
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;

  // ---- layers ----
  virtual absl::Status LinearForward(ConstMatrixView x, const float* w, const float* b,
                                     Activation act, MatrixView y) = 0;
  virtual absl::Status LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y,
                                      Activation act, MatrixView dy, float* dw, float* db,
                                      MatrixView dx, bool accumulate) = 0;
  virtual absl::Status ReluForward(ConstMatrixView x, MatrixView y) = 0;
  virtual absl::Status ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx) = 0;
  virtual absl::Status EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling,
                                           bool accumulate, MatrixView out) = 0;
  virtual absl::Status EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags,
                                            Pooling pooling, float* d_rows) = 0;
  virtual absl::Status DotInteractionForward(ConstMatrixView t, int n, int dim,
                                             MatrixView z) = 0;
  virtual absl::Status DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n,
                                              int dim, MatrixView dt) = 0;
  // dst = src (the building block of Concat).
  virtual absl::Status CopyMatrix(ConstMatrixView src, MatrixView dst) = 0;
  // dst += src.
  virtual absl::Status AddMatrix(ConstMatrixView src, MatrixView dst) = 0;
  // DCN-v2 cross layer: out = x0 * u + xl, and its backward.
  virtual absl::Status CrossCombineForward(ConstMatrixView x0, ConstMatrixView u,
                                           ConstMatrixView xl, MatrixView out) = 0;
  virtual absl::Status CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0,
                                            ConstMatrixView u, MatrixView du, MatrixView dx0,
                                            bool accumulate) = 0;
  // Factorization machine's second-order term over n vectors of width dim.
  virtual absl::Status FmForward(ConstMatrixView t, int n, int dim, bool accumulate,
                                 MatrixView out) = 0;
  virtual absl::Status FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim,
                                  bool accumulate, MatrixView dt) = 0;
  // DIN's attention pooling (see attention_pooling.h): per-item arrays
  // are indexed by k - first, first = the host's bags.offsets[0].
  virtual absl::Status AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                                         ConstMatrixView target, MatrixView features) = 0;
  virtual absl::Status WeightedBagSum(const float* items, const Bags& bags, uint32_t first,
                                      const float* scores, MatrixView out) = 0;
  virtual absl::Status WeightedBagDot(ConstMatrixView d_out, const float* items,
                                      const Bags& bags, uint32_t first, float* d_scores) = 0;
  virtual absl::Status AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                                                const float* items, const Bags& bags,
                                                uint32_t first, const float* scores,
                                                ConstMatrixView target, float* d_items,
                                                MatrixView d_target) = 0;
  // BST's self-attention over a sequence (see sequence_attention.h): the
  // items plus positions, the heads' softmax attention within each bag,
  // the mean over a bag, and their backward; per-item rows at k - first
  // (with a `target` appended to each bag, as sequence_attention.h says).
  virtual absl::Status SequenceInputs(const float* items, const Bags& bags, uint32_t first,
                                      const float* positions, int max_length,
                                      ConstMatrixView target, MatrixView x) = 0;
  virtual absl::Status SequenceInputsBackward(ConstMatrixView dx, const Bags& bags,
                                              uint32_t first, int max_length, float* d_items,
                                              float* d_positions, MatrixView d_target) = 0;
  virtual absl::Status SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                         const Bags& bags, uint32_t first, int heads, int max_n,
                                         float* weights, MatrixView out) = 0;
  virtual absl::Status SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k,
                                                 ConstMatrixView v, const float* weights,
                                                 ConstMatrixView d_out, const Bags& bags,
                                                 uint32_t first, int heads, int max_n,
                                                 MatrixView dq, MatrixView dk, MatrixView dv) = 0;
  virtual absl::Status SequenceMean(ConstMatrixView y, const Bags& bags, uint32_t first,
                                    MatrixView out) = 0;
  virtual absl::Status SequenceMeanBackward(ConstMatrixView d_out, const Bags& bags,
                                            uint32_t first, MatrixView dy) = 0;
  // Layer normalization of each row and its backward (see layer_norm.h);
  // stats: [rows x 2] (each row's mean and 1/std), written by the forward.
  virtual absl::Status LayerNormForward(ConstMatrixView x, const float* gain, const float* bias,
                                        MatrixView y, float* stats) = 0;
  virtual absl::Status LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                                         ConstMatrixView dy, MatrixView dx, float* dgain,
                                         float* dbias, bool accumulate) = 0;
  // A gate's softmax mix of experts and its backward (see expert_mix.h).
  virtual absl::Status ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g,
                                        MatrixView out) = 0;
  virtual absl::Status ExpertMixBackward(ConstMatrixView g, ConstMatrixView y,
                                         ConstMatrixView d_out, MatrixView dz, MatrixView dy) = 0;
  // Inverted dropout in place and its backward (see dropout.h): the same
  // elements are dropped on every device for the same seed and rows.
  virtual absl::Status DropoutForward(MatrixView y, float rate, uint64_t seed,
                                      int64_t first_row) = 0;
  virtual absl::Status DropoutBackward(ConstMatrixView y, MatrixView dy, float rate) = 0;
  // Writes dlogits and returns the loss sum; waits for the device.
  virtual absl::StatusOr<double> SigmoidBceLoss(const float* logits, const float* labels, int n,
                                                float* dlogits) = 0;
  virtual absl::Status Sigmoid(const float* logits, int n, float* probs) = 0;
};

// A grow-only allocation on a Device, freed on destruction. Reserve() keeps
// the memory when it is already large enough, so buffers sized for the
// largest batch are never reallocated. Contents are not preserved on growth.
// Move-only; must not outlive its Device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : device_(std::exchange(o.device_, nullptr)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(ptr_, o.ptr_);
    std::swap(capacity_, o.capacity_);
    return *this;
  }

  absl::Status Reserve(Device* device, size_t bytes) {
    if (device == device_ && bytes <= capacity_) return absl::OkStatus();
    Release();
    absl::StatusOr<void*> p = device->Allocate(bytes == 0 ? 1 : bytes);
    if (!p.ok()) return p.status();
    device_ = device;
    ptr_ = *p;
    capacity_ = bytes;
    return absl::OkStatus();
  }
  template <class T = float>
  absl::Status ReserveElements(Device* device, size_t count) {
    return Reserve(device, count * sizeof(T));
  }

  void* data() const { return ptr_; }
  template <class T = float>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t capacity() const { return capacity_; }

 private:
  void Release() {
    if (ptr_ != nullptr) device_->Free(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }

  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// "cpu", "cuda" (= "cuda:0") or "cuda:<ordinal>". InvalidArgument for other
// names; Unavailable for CUDA in a build without CUDA or on a machine without
// a usable GPU.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& name);

}  // namespace pstrain::worker::nn
