// LayerStack: a contiguous run of Linear layers (a pipeline stage's share of
// the tower, or DLRM's bottom MLP) whose hidden activations are kept per
// micro-batch: the forward of a micro-batch fills a StackActivations that
// stays alive until its backward, so several micro-batches can be in flight
// (pipeline schedules). Parameters and gradients come in by table id, like
// the models'. Not thread-safe: one stage thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/nn/device.h"
#include "worker/nn/linear.h"
#include "worker/nn/tensor.h"

namespace pstrain::worker {

// One Linear layer: y = act(x W^T + b), W [out x in] and b [out] in tables
// `weight` and `bias`.
struct LinearSpec {
  int in = 0;
  int out = 0;
  nn::Activation act = nn::Activation::kNone;
  uint32_t weight = 0;
  uint32_t bias = 0;
};

// The outputs of a stack's hidden layers (all but the last) for one
// micro-batch. Grow-only buffers, reused when the slot is reused.
struct StackActivations {
  std::vector<nn::DeviceBuffer> hidden;
};

class LayerStack {
 public:
  // REQUIRES: layers non-empty, each layer's `in` equals the previous `out`.
  explicit LayerStack(std::vector<LinearSpec> layers);

  int in() const { return layers_.front().in; }
  int out() const { return layers_.back().out; }
  const std::vector<LinearSpec>& layers() const { return layers_; }

  // out ([rows x out()], may be strided) = stack(x); the hidden outputs go
  // to `acts`.
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x,
                       const std::vector<const float*>& params, StackActivations* acts,
                       nn::MatrixView out) const;

  // Backward of the Forward that filled `acts` from `x` with output `out`.
  // `d_out` holds dL/dout and is overwritten (scratch). Gradients of every
  // layer are overwritten, or added to with `accumulate`; dL/dx goes to `dx`
  // unless dx.data is null.
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x,
                        const std::vector<const float*>& params, const StackActivations& acts,
                        nn::ConstMatrixView out, nn::MatrixView d_out,
                        const std::vector<float*>& grads, nn::MatrixView dx, bool accumulate);

 private:
  std::vector<LinearSpec> layers_;
  std::vector<nn::DeviceBuffer> dy_;  // gradient scratch of the hidden layers
};

}  // namespace pstrain::worker
