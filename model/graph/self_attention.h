// SelfAttention: a Behavior Sequence Transformer layer (Chen et al. 2019,
// BST) over a sequence column: each row's items h_1..h_n (the rows of an
// embedding table its bag names, oldest first), plus a learned position
// embedding (position 0 is the most recent item), go through one layer of
// multi-head self-attention with a residual connection,
//   X = H + P,  Y = X + concat_heads(softmax(Q_h K_h^T / sqrt(d_h)) V_h) W_o,
// Q = X W_q, K = X W_k, V = X W_v, and the output is the mean of Y's rows.
// (No layer norm and no feed-forward block: a model file adds an mlp after
// it.) Tables: "<name>.position" [max_length x d], "<name>.q", ".k", ".v",
// ".o" [d x d]. Items past max_length - 1 positions share the last
// position. Runs on host memory (the CPU device). Not thread-safe.
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
                int max_length, uint64_t seed);

  // out ([rows x dim]) = the mean over each row's positions of Y.
  absl::Status Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                       const std::vector<const float*>& params, nn::MatrixView out);
  // Given dL/dout: adds the items' gradients into `d_items` and writes (or
  // with `accumulate` adds to) the layer's tables' gradients.
  absl::Status Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                        const std::vector<const float*>& params, nn::ConstMatrixView d_out,
                        float* d_items, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready);

 private:
  int Position(int i, int n) const;  // of item i (0: oldest) of n

  const int dim_, heads_, max_length_;
  uint32_t position_ = 0, q_ = 0, k_ = 0, v_ = 0, o_ = 0;
  // The last Forward's per-item values, rows after rows: X, Q, K, V, the
  // heads' concatenated outputs, and per row its attention weights.
  std::vector<float> x_, q_act_, k_act_, v_act_, heads_out_, weights_;
  std::vector<size_t> weight_begin_;  // by row: its n x n x heads weights in weights_
  int rows_ = 0;
};

}  // namespace pstrain::worker
