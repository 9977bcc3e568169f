// Mlp: a model's MLP: declares the tables of a LayerStack with ReLU after
// every layer (or every layer but the last), "<prefix>.<i>.weight"
// ([width_i x width_{i-1}]) and "<prefix>.<i>.bias" ([width_i]), and keeps
// the hidden activations of its last Forward, reused across steps. A tower
// MLP (dropout_hidden) applies the step's dropout to the output of every
// hidden layer while training. Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/dropout.h"
#include "model/nn/layer_stack.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

// Declares the tables of Linear layers `widths` from width `in` (ReLU after
// each, but the last unless relu_last) and returns them as LinearSpecs.
// `he_hidden`: the weights of every layer but the last start with HeInit
// instead of LinearWeightInit.
std::vector<LinearSpec> DeclareLinearLayers(TableRegistry* registry, const std::string& prefix,
                                            int in, const std::vector<int>& widths,
                                            bool relu_last, uint64_t seed, bool he_hidden = false);

class Mlp {
 public:
  // Declares the tables in `registry`. REQUIRES: in >= 0, widths non-empty
  // and positive. `dropout_hidden`: Forward applies a DropoutRun to the
  // hidden layers' outputs (never to the last layer's).
  Mlp(TableRegistry* registry, const std::string& prefix, int in, std::vector<int> widths,
      bool relu_last, uint64_t seed, bool dropout_hidden = false, bool he_hidden = false);

  int in() const { return stack_.in(); }
  int out() const { return stack_.out(); }

  // Sizes the activation buffers for `batch` rows.
  absl::Status Reserve(nn::Device* device, int batch);

  // out ([B x out()], may be a strided view) = MLP(x), with `dropout` on
  // the hidden layers when this is a tower MLP and dropout.rate > 0.
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x,
                       const std::vector<const float*>& params, nn::MatrixView out,
                       const nn::DropoutRun& dropout = {});

  // Given the x and out of the last Forward and dL/dout in `d_out` (modified
  // in place), overwrites (or with `accumulate` adds to) the gradients of
  // every layer's tables in `grads` and writes dL/dx into `dx` unless
  // dx.data is null. `ready`, when set, is told each table whose gradient
  // was just written (last layer first).
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x,
                        const std::vector<const float*>& params, nn::ConstMatrixView out,
                        nn::MatrixView d_out, const std::vector<float*>& grads,
                        nn::MatrixView dx, bool accumulate,
                        const std::function<void(uint32_t)>* ready = nullptr);

 private:
  LayerStack stack_;
  StackActivations acts_;  // of the last Forward
  bool dropout_hidden_ = false;
};

}  // namespace pstrain::worker
