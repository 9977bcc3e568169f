// TargetAttention: DIN's attention of a behaviour sequence against a target
// (Zhou et al. 2018). For each row, every item h of its sequence (the rows
// of an embedding table its bag names, in order) is scored by a small MLP
// over [h, t, h - t, h * t] against the row's target t, and the output is
// the score-weighted sum of the items (no softmax, as DIN: the scores keep
// the strength of the interest). A row's sequence is its bag: its length
// masks the rest. Runs on any device (nn/attention_pooling.h's ops, the
// MLP's). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/layer_stack.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

class TargetAttention {
 public:
  // Declares the scoring MLP's tables "<name>.<i>.weight/bias": `widths`
  // (ReLU after each) and a 1-wide score, over 4 x dim inputs.
  TargetAttention(TableRegistry* registry, const std::string& name, int dim,
                  const std::vector<int>& widths, uint64_t seed);

  int dim() const { return dim_; }

  // out ([rows x dim]) = sum over row b's items h of score(h, t_b) * h.
  // `items`: the sequence table's rows bound for this step; `seq`: the
  // sequence field's bags for these rows; `target`: [rows x dim].
  absl::Status Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                       nn::ConstMatrixView target, const std::vector<const float*>& params,
                       nn::MatrixView out);
  // Given dL/dout, adds the items' gradients into `d_items` (the table's
  // bound gradient rows), writes dL/dtarget into `d_target` (unless its
  // data is null) and writes (or adds to) the MLP's.
  absl::Status Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                        nn::ConstMatrixView target, const std::vector<const float*>& params,
                        nn::ConstMatrixView d_out, float* d_items, nn::MatrixView d_target,
                        const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready);

 private:
  nn::MatrixView Features() const { return nn::MatrixView(features_.as(), items_, 4 * dim_); }

  const int dim_;
  LayerStack mlp_;
  StackActivations acts_;
  uint32_t first_ = 0;  // the last Forward's bags.offsets[0]
  int items_ = 0;       // and its items
  // On the device: per item, the MLP's input and its score, and their
  // gradients.
  nn::DeviceBuffer features_, scores_, d_scores_, d_features_;
};

}  // namespace pstrain::worker
