// Mixture of experts, the layers of MMoE (Ma et al. 2018, "Modeling Task
// Relationships in Multi-task Learning with Multi-gate Mixture-of-Experts")
// and PLE's customized gate control (Tang et al. 2020):
//
//   Experts: `count` MLPs over one input (ReLU after every layer), their
//   outputs side by side, [rows x count * width].
//   ExpertGate: a task's gate, softmax(x_gate W + b) over the experts of
//   one or more Experts layers, and their weighted sum, [rows x width].
//
// MMoE is one Experts layer and a gate per task; PLE's gate of a task mixes
// the shared experts and that task's own. Run on any device (the MLPs' ops
// and nn/expert_mix.h's). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/models/mlp.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

class Experts {
 public:
  // Declares expert e's tables "<name>.<e>.<i>.weight/bias".
  Experts(TableRegistry* registry, const std::string& name, int in, int count,
          const std::vector<int>& widths, uint64_t seed);

  int width() const { return width_; }  // one expert's output
  absl::Status Reserve(nn::Device* device, int rows);

  // out: [rows x count * width].
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x,
                       const std::vector<const float*>& params, nn::MatrixView out);
  // Given the last Forward's x and out and dL/dout (modified), writes (or
  // adds to) the experts' gradients and writes dL/dx unless dx.data is null.
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x,
                        const std::vector<const float*>& params, nn::ConstMatrixView out,
                        nn::MatrixView d_out, const std::vector<float*>& grads, nn::MatrixView dx,
                        bool accumulate, const std::function<void(uint32_t)>* ready);

 private:
  const int width_;
  std::vector<std::unique_ptr<Mlp>> experts_;
  nn::DeviceBuffer dx_scratch_;  // an expert's dL/dx, summed into dx
};

class ExpertGate {
 public:
  // Declares the gate's linear layer "<name>.0.weight/bias": `gate_in`
  // columns to `experts` scores.
  ExpertGate(TableRegistry* registry, const std::string& name, int gate_in, int experts,
             int width, uint64_t seed);

  // x: [rows x gate_in + experts * width]: the gate's input, then the
  // experts' outputs; out: [rows x width].
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x,
                       const std::vector<const float*>& params, nn::MatrixView out);
  // Writes dL/dx (both parts; dx.data non-null) and the gate's gradients.
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x,
                        const std::vector<const float*>& params, nn::ConstMatrixView d_out,
                        const std::vector<float*>& grads, nn::MatrixView dx, bool accumulate,
                        const std::function<void(uint32_t)>* ready);

 private:
  const int gate_in_, experts_, width_;
  Mlp gate_;
  nn::DeviceBuffer logits_, weights_, d_logits_;  // [rows x experts], on the device
};

}  // namespace pstrain::worker
