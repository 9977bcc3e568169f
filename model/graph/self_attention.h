// SelfAttention: a Behavior Sequence Transformer layer (Chen et al. 2019,
// BST) over a sequence column: each row's items h_1..h_n (the rows of an
// embedding table its bag names, oldest first), plus a learned position
// embedding (position 0 is the most recent item), go through one layer of
// multi-head self-attention with a residual connection,
//   X = H + P,  Y = X + concat_heads(softmax(Q_h K_h^T / sqrt(d_h)) V_h) W_o^T,
// Q = X W_q^T, K = X W_k^T, V = X W_v^T, and the output is the mean of Y's
// rows. With `layer_norm`, Y = LN1(X + attention) (post-norm, as BST and the
// original Transformer); with a `feed_forward` width F, Z = Y + ReLU(Y W_1^T
// + b_1) W_2^T + b_2 (then LN2(Z) with layer_norm), and the output is the
// mean of Z's rows. Tables: "<name>.position" [max_length x d], "<name>.wq",
// ".wk", ".wv", ".wo" [d x d], each [out x in] as a Linear layer's; then
// ".ln1.gain", ".ln1.bias" [d]; ".ff.0.weight" [F x d], ".ff.0.bias",
// ".ff.1.weight" [d x F], ".ff.1.bias"; ".ln2.gain", ".ln2.bias". Items past
// max_length - 1 positions share the last position. With a target (BST's
// candidate item, a [rows x dim] input), each row's sequence is its items
// followed by the target, the most recent (position 0), as in BST, where the
// target item attends to the history and the history to it; the mean then
// covers the target's output too. Runs on any device
// (nn/sequence_attention.h's ops, Linear's and LayerNorm's). Not
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

class SelfAttention {
 public:
  // REQUIRES: dim % heads == 0, max_length >= 1.
  SelfAttention(TableRegistry* registry, const std::string& name, int dim, int heads,
                int max_length, int feed_forward, bool layer_norm, uint64_t seed);

  // out ([rows x dim]) = the mean over each row's positions of Y. `target`:
  // the candidates appended to the rows' sequences (null data: none).
  absl::Status Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                       nn::ConstMatrixView target, const std::vector<const float*>& params,
                       nn::MatrixView out);
  // Given dL/dout: adds the items' gradients into `d_items`, writes the
  // target's into `d_target` (when Forward had one) and writes (or with
  // `accumulate` adds to) the layer's tables' gradients.
  absl::Status Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                        const std::vector<const float*>& params, nn::ConstMatrixView d_out,
                        float* d_items, nn::MatrixView d_target, const std::vector<float*>& grads,
                        bool accumulate, const std::function<void(uint32_t)>* ready);

 private:
  // The attention's residual sum, after LN1 when there is one; the block's
  // output (after the feed-forward block and LN2 when there are).
  nn::MatrixView AfterAttention() const;
  nn::MatrixView Output() const;
  // The per-item matrices of the last Forward ([items x dim]).
  nn::MatrixView Rows(const nn::DeviceBuffer& b) const {
    return nn::MatrixView(b.as<float>(), items_, dim_);
  }

  // in ([items x dim], x_ when `norm` is none) to a LayerNorm's output,
  // and back: the gradient at its output (dy) to its input (dx).
  struct Norm {
    uint32_t gain = 0, bias = 0;
    nn::DeviceBuffer out, stats;
  };

  const int dim_, heads_, max_length_, feed_forward_;
  const bool layer_norm_;
  uint32_t position_ = 0, q_ = 0, k_ = 0, v_ = 0, o_ = 0;
  uint32_t ff0_w_ = 0, ff0_b_ = 0, ff1_w_ = 0, ff1_b_ = 0;
  Norm ln1_, ln2_;
  // The feed-forward block's hidden rows [items x F] and its sum Y + FFN(Y).
  nn::DeviceBuffer ff_hidden_, ff_sum_, d_hidden_, d_sum_;
  // The last Forward's rows: its first item, its sequence's item count,
  // the per-item matrices' rows (the items, plus a target a row) and the
  // longest bag (a target included).
  uint32_t first_ = 0;
  int seq_items_ = 0, items_ = 0, max_n_ = 0, rows_ = 0;
  bool with_target_ = false;
  // With a target: the bags of the per-item rows (nn::TargetBagOffsets),
  // on the host and on the device; `bags_` are what the ops after the
  // inputs take, with first = bags_first_.
  std::vector<uint32_t> target_offsets_;
  nn::DeviceBuffer target_offsets_device_, d_target_scratch_;
  nn::Bags bags_;
  uint32_t bags_first_ = 0;
  // Per item: X, Q, K, V, the heads' outputs, Y; per item and head, the
  // attention weights (max_n_ each). Then the backward's gradients.
  nn::DeviceBuffer x_, q_act_, k_act_, v_act_, heads_out_, y_, weights_;
  nn::DeviceBuffer dy_, dx_, dq_, dk_, dv_, d_heads_, d_tmp_;
};

}  // namespace pstrain::worker
