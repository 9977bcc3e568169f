// LayerStack: a contiguous run of Linear layers: every MLP of the models
// (Mlp, DLRM's bottom, a tower) and a pipeline stage's share of a tower.
// Hidden activations live in a StackActivations the caller owns: the
// forward of a micro-batch fills one that stays alive until its backward,
// so several micro-batches can be in flight (pipeline schedules), and a
// model keeps one for its last forward. Parameters and gradients come in by
// table id. A tower applies the step's dropout (nn::DropoutRun) to the
// output of every hidden layer while training.
//
// Tensor parallelism (Megatron-style): with a Collective over the T ranks
// of a tensor-parallel group, a kColumn layer holds rows [o0, o1) of W and
// b (its output is this rank's slice of the columns) and the kRow layer
// after it holds the matching columns [o0, o1) of W: its partial products
// are summed by one AllReduce in the forward pass (the bias is added by
// rank 0 only, the activation after the sum), and the column layer's input
// gradient by one AllReduce in the backward pass. Every rank computes the
// full bias gradient of a kRow layer and the whole of a kNone layer
// (replicated); which rank pushes what is the caller's business.
// Not thread-safe: one stage thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "common/collective.h"
#include "model/nn/device.h"
#include "model/nn/dropout.h"
#include "model/nn/linear.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

// How a layer is split over a tensor-parallel group.
enum class TpSplit : uint8_t {
  kNone,    // replicated: every rank holds and computes the whole layer
  kColumn,  // W and b cut by output rows: `out` is this rank's share
  kRow,     // W cut by input columns: `in` is this rank's share; b whole
};

// One Linear layer: y = act(x W^T + b), W [out x in] and b [out] in tables
// `weight` and `bias` (with a split: this rank's shapes and slice tables).
struct LinearSpec {
  int in = 0;
  int out = 0;
  nn::Activation act = nn::Activation::kNone;
  uint32_t weight = 0;
  uint32_t bias = 0;
  TpSplit split = TpSplit::kNone;
};

// The outputs of a stack's hidden layers (all but the last) for one
// micro-batch, and the dropout rate their forward applied. Grow-only
// buffers, reused when the slot is reused.
struct StackActivations {
  std::vector<nn::DeviceBuffer> hidden;
  float dropped_rate = 0.0f;
};

class LayerStack {
 public:
  // REQUIRES: layers non-empty, each layer's `in` equals the previous `out`;
  // `tp` (not owned, may be null without splits) outlives this; each kColumn
  // layer is followed by a kRow layer; buffers are in host memory when
  // layers are split. `dropout_salt` tells this stack's dropout draws from
  // other stacks'.
  explicit LayerStack(std::vector<LinearSpec> layers, Collective* tp = nullptr,
                      uint64_t dropout_salt = 0);

  int in() const { return layers_.front().in; }
  int out() const { return layers_.back().out; }
  const std::vector<LinearSpec>& layers() const { return layers_; }
  // Every layer's weight and bias table, first layer first.
  std::vector<uint32_t> table_ids() const;

  // Sizes `acts` and the gradient scratch for `rows` rows ahead of time
  // (Forward and Backward grow them when needed).
  absl::Status Reserve(nn::Device* device, int rows, StackActivations* acts);

  // out ([rows x out()], may be strided) = stack(x); the hidden outputs go
  // to `acts`. With dropout.rate > 0, dropout follows every hidden layer
  // (they must be ReLU'd: the contract of DropoutBackward).
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x,
                       const std::vector<const float*>& params, StackActivations* acts,
                       nn::MatrixView out, const nn::DropoutRun& dropout = {}) const;

  // Backward of the Forward that filled `acts` from `x` with output `out`.
  // `d_out` holds dL/dout and is overwritten (scratch). Gradients of every
  // layer are overwritten, or added to with `accumulate`; dL/dx goes to `dx`
  // unless dx.data is null. `ready`, when set, is told each table whose
  // gradient was just written (last layer first).
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x,
                        const std::vector<const float*>& params, const StackActivations& acts,
                        nn::ConstMatrixView out, nn::MatrixView d_out,
                        const std::vector<float*>& grads, nn::MatrixView dx, bool accumulate,
                        const std::function<void(uint32_t)>* ready = nullptr);

 private:
  std::vector<LinearSpec> layers_;
  Collective* tp_;
  uint64_t dropout_salt_;
  std::vector<nn::DeviceBuffer> dy_;  // gradient scratch of the hidden layers
};

}  // namespace pstrain::worker
