#include "model/graph/self_attention.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/table_spec.h"
#include "common/status.h"
#include "model/nn/sequence_attention.h"

namespace pstrain::worker {

SelfAttention::SelfAttention(TableRegistry* registry, const std::string& name, int dim, int heads,
                             int max_length, int feed_forward, bool layer_norm, uint64_t seed)
    : dim_(dim),
      heads_(heads),
      max_length_(max_length),
      feed_forward_(feed_forward),
      layer_norm_(layer_norm) {
  const uint64_t dd = static_cast<uint64_t>(dim) * dim;
  position_ = registry->AddDense(absl::StrCat(name, ".position"),
                                 static_cast<uint64_t>(max_length) * dim, EmbeddingInit(dim, seed));
  q_ = registry->AddDense(absl::StrCat(name, ".wq"), dd, LinearWeightInit(dim, seed));
  k_ = registry->AddDense(absl::StrCat(name, ".wk"), dd, LinearWeightInit(dim, seed));
  v_ = registry->AddDense(absl::StrCat(name, ".wv"), dd, LinearWeightInit(dim, seed));
  o_ = registry->AddDense(absl::StrCat(name, ".wo"), dd, LinearWeightInit(dim, seed));
  const auto add_norm = [&](const std::string& which, Norm* n) {
    n->gain = registry->AddDense(absl::StrCat(name, ".", which, ".gain"), dim,
                                 InitializerConfig{InitKind::kConstant, 1.0f, seed});
    n->bias = registry->AddDense(absl::StrCat(name, ".", which, ".bias"), dim, ZeroInit(seed));
  };
  if (layer_norm) add_norm("ln1", &ln1_);
  if (feed_forward > 0) {
    const uint64_t f = static_cast<uint64_t>(feed_forward);
    ff0_w_ = registry->AddDense(absl::StrCat(name, ".ff.0.weight"), f * dim,
                                LinearWeightInit(dim, seed));
    ff0_b_ = registry->AddDense(absl::StrCat(name, ".ff.0.bias"), f, registry->BiasInit(dim, seed));
    ff1_w_ = registry->AddDense(absl::StrCat(name, ".ff.1.weight"), f * dim,
                                LinearWeightInit(feed_forward, seed));
    ff1_b_ = registry->AddDense(absl::StrCat(name, ".ff.1.bias"), dim,
                                registry->BiasInit(feed_forward, seed));
    if (layer_norm) add_norm("ln2", &ln2_);
  }
}

absl::Status SelfAttention::Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                                    nn::ConstMatrixView target,
                                    const std::vector<const float*>& params, nn::MatrixView out) {
  // The item count and the longest bag size the buffers: read on the host.
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (seq.host_offsets == nullptr && !device.host_memory()) {
    return absl::InternalError("self_attention: the bags' offsets are not on the host");
  }
  with_target_ = target.data != nullptr;
  first_ = offsets[0];
  seq_items_ = static_cast<int>(offsets[seq.batch] - first_);
  rows_ = seq.batch;
  const int extra = with_target_ ? 1 : 0;
  items_ = seq_items_ + extra * rows_;
  max_n_ = 1;
  for (int b = 0; b < seq.batch; ++b) {
    max_n_ = std::max(max_n_, static_cast<int>(offsets[b + 1] - offsets[b]) + extra);
  }
  bags_ = seq;
  bags_first_ = first_;
  if (with_target_) {
    target_offsets_.resize(static_cast<size_t>(rows_) + 1);
    nn::TargetBagOffsets(offsets, rows_, target_offsets_.data());
    // (The ops after the inputs read the offsets only; the index is kept.)
    bags_ = nn::Bags{seq.index, target_offsets_.data(), rows_, target_offsets_.data()};
    bags_first_ = 0;
    if (!device.host_memory()) {
      const size_t bytes = target_offsets_.size() * sizeof(uint32_t);
      PS_RETURN_IF_ERROR(target_offsets_device_.Reserve(&device, bytes));
      PS_RETURN_IF_ERROR(
          device.CopyToDevice(target_offsets_device_.as(), target_offsets_.data(), bytes));
      bags_.offsets = target_offsets_device_.as<uint32_t>();
    }
  }
  const size_t n = static_cast<size_t>(std::max(items_, 1));
  for (nn::DeviceBuffer* b : {&x_, &q_act_, &k_act_, &v_act_, &heads_out_, &y_, &ln1_.out,
                              &ff_sum_, &ln2_.out}) {
    PS_RETURN_IF_ERROR(b->ReserveElements(&device, n * dim_));
  }
  PS_RETURN_IF_ERROR(ln1_.stats.ReserveElements(&device, 2 * n));
  PS_RETURN_IF_ERROR(ln2_.stats.ReserveElements(&device, 2 * n));
  PS_RETURN_IF_ERROR(ff_hidden_.ReserveElements(&device, n * std::max(feed_forward_, 1)));
  PS_RETURN_IF_ERROR(weights_.ReserveElements(&device, n * heads_ * max_n_));
  if (items_ > 0) {
    const nn::MatrixView x = Rows(x_), y = Rows(y_);
    PS_RETURN_IF_ERROR(device.SequenceInputs(items, seq, first_, params[position_], max_length_,
                                             target, x));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[q_], nullptr, nn::Activation::kNone,
                                            Rows(q_act_)));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[k_], nullptr, nn::Activation::kNone,
                                            Rows(k_act_)));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[v_], nullptr, nn::Activation::kNone,
                                            Rows(v_act_)));
    PS_RETURN_IF_ERROR(device.SequenceAttention(Rows(q_act_), Rows(k_act_), Rows(v_act_), bags_,
                                                bags_first_, heads_, max_n_, weights_.as(),
                                                Rows(heads_out_)));
    PS_RETURN_IF_ERROR(device.LinearForward(Rows(heads_out_), params[o_], nullptr,
                                            nn::Activation::kNone, y));
    PS_RETURN_IF_ERROR(device.AddMatrix(x, y));  // the residual
    if (layer_norm_) {
      PS_RETURN_IF_ERROR(device.LayerNormForward(y, params[ln1_.gain], params[ln1_.bias],
                                                 Rows(ln1_.out), ln1_.stats.as()));
    }
    if (feed_forward_ > 0) {
      const nn::MatrixView hidden(ff_hidden_.as(), items_, feed_forward_), sum = Rows(ff_sum_);
      PS_RETURN_IF_ERROR(device.LinearForward(AfterAttention(), params[ff0_w_], params[ff0_b_],
                                              nn::Activation::kRelu, hidden));
      PS_RETURN_IF_ERROR(device.LinearForward(hidden, params[ff1_w_], params[ff1_b_],
                                              nn::Activation::kNone, sum));
      PS_RETURN_IF_ERROR(device.AddMatrix(AfterAttention(), sum));  // the residual
      if (layer_norm_) {
        PS_RETURN_IF_ERROR(device.LayerNormForward(sum, params[ln2_.gain], params[ln2_.bias],
                                                   Rows(ln2_.out), ln2_.stats.as()));
      }
    }
  }
  return device.SequenceMean(Output(), bags_, bags_first_, out);
}

nn::MatrixView SelfAttention::AfterAttention() const {
  return layer_norm_ ? Rows(ln1_.out) : Rows(y_);
}

nn::MatrixView SelfAttention::Output() const {
  if (feed_forward_ == 0) return AfterAttention();
  return layer_norm_ ? Rows(ln2_.out) : Rows(ff_sum_);
}

absl::Status SelfAttention::Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                                     const std::vector<const float*>& params,
                                     nn::ConstMatrixView d_out, float* d_items,
                                     nn::MatrixView d_target, const std::vector<float*>& grads,
                                     bool accumulate, const std::function<void(uint32_t)>* ready) {
  (void)items;
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (seq.batch != rows_ || offsets[0] != first_ ||
      static_cast<int>(offsets[seq.batch] - first_) != seq_items_) {
    return absl::InternalError("self_attention: backward of other rows than its forward");
  }
  if (with_target_ && d_target.data == nullptr) {
    // The target needs no gradient: its rows of dx go to scratch.
    PS_RETURN_IF_ERROR(d_target_scratch_.ReserveElements(&device, static_cast<size_t>(rows_) * dim_));
    d_target = nn::MatrixView(d_target_scratch_.as(), rows_, dim_);
  } else if (!with_target_) {
    d_target = nn::MatrixView();
  }
  std::vector<std::pair<uint32_t, size_t>> tables = {
      {q_, dim_ * dim_}, {k_, dim_ * dim_}, {v_, dim_ * dim_}, {o_, dim_ * dim_}};
  if (layer_norm_) tables.insert(tables.end(), {{ln1_.gain, dim_}, {ln1_.bias, dim_}});
  if (feed_forward_ > 0) {
    const size_t f = static_cast<size_t>(feed_forward_);
    tables.insert(tables.end(), {{ff0_w_, f * dim_}, {ff0_b_, f}, {ff1_w_, f * dim_}, {ff1_b_, dim_}});
    if (layer_norm_) tables.insert(tables.end(), {{ln2_.gain, dim_}, {ln2_.bias, dim_}});
  }
  if (!accumulate) {
    PS_RETURN_IF_ERROR(device.Zero(grads[position_],
                                   sizeof(float) * static_cast<size_t>(max_length_) * dim_));
    if (items_ == 0) {
      for (const auto& [t, size] : tables) {
        PS_RETURN_IF_ERROR(device.Zero(grads[t], sizeof(float) * size));
      }
    }
  }
  if (items_ > 0) {
    const size_t per_item = static_cast<size_t>(items_) * dim_;
    for (nn::DeviceBuffer* b : {&dy_, &dx_, &dq_, &dk_, &dv_, &d_heads_, &d_tmp_, &d_sum_}) {
      PS_RETURN_IF_ERROR(b->ReserveElements(&device, per_item));
    }
    PS_RETURN_IF_ERROR(
        d_hidden_.ReserveElements(&device, static_cast<size_t>(items_) * std::max(feed_forward_, 1)));
    const nn::MatrixView dy = Rows(dy_), dx = Rows(dx_), tmp = Rows(d_tmp_);
    // dy: the gradient at the block's output, then walked back to the
    // attention's residual sum Y = X + heads W_o^T.
    PS_RETURN_IF_ERROR(device.SequenceMeanBackward(d_out, bags_, bags_first_, dy));
    if (feed_forward_ > 0) {
      const nn::MatrixView d_sum = Rows(d_sum_);
      if (layer_norm_) {
        PS_RETURN_IF_ERROR(device.LayerNormBackward(Rows(ff_sum_), params[ln2_.gain],
                                                    ln2_.stats.as(), dy, d_sum, grads[ln2_.gain],
                                                    grads[ln2_.bias], accumulate));
      } else {
        PS_RETURN_IF_ERROR(device.CopyMatrix(dy, d_sum));
      }
      // sum = A + FFN(A), A = AfterAttention(): dA = d_sum + FFN's backward.
      const nn::MatrixView hidden(ff_hidden_.as(), items_, feed_forward_);
      const nn::MatrixView d_hidden(d_hidden_.as(), items_, feed_forward_);
      PS_RETURN_IF_ERROR(device.CopyMatrix(d_sum, dy));
      PS_RETURN_IF_ERROR(device.LinearBackward(hidden, params[ff1_w_], Rows(ff_sum_),
                                               nn::Activation::kNone, d_sum, grads[ff1_w_],
                                               grads[ff1_b_], d_hidden, accumulate));
      PS_RETURN_IF_ERROR(device.LinearBackward(AfterAttention(), params[ff0_w_], hidden,
                                               nn::Activation::kRelu, d_hidden, grads[ff0_w_],
                                               grads[ff0_b_], tmp, accumulate));
      PS_RETURN_IF_ERROR(device.AddMatrix(tmp, dy));
    }
    if (layer_norm_) {
      PS_RETURN_IF_ERROR(device.LayerNormBackward(Rows(y_), params[ln1_.gain], ln1_.stats.as(),
                                                  dy, tmp, grads[ln1_.gain], grads[ln1_.bias],
                                                  accumulate));
      PS_RETURN_IF_ERROR(device.CopyMatrix(tmp, dy));
    }
    // Y = X + heads W_o^T: dX starts as dY.
    PS_RETURN_IF_ERROR(device.CopyMatrix(dy, dx));
    PS_RETURN_IF_ERROR(device.LinearBackward(Rows(heads_out_), params[o_], Rows(y_),
                                             nn::Activation::kNone, dy, grads[o_], nullptr,
                                             Rows(d_heads_), accumulate));
    PS_RETURN_IF_ERROR(device.SequenceAttentionBackward(
        Rows(q_act_), Rows(k_act_), Rows(v_act_), weights_.as(), Rows(d_heads_), bags_,
        bags_first_, heads_, max_n_, Rows(dq_), Rows(dk_), Rows(dv_)));
    const std::pair<uint32_t, const nn::DeviceBuffer*> projections[] = {
        {q_, &q_act_}, {k_, &k_act_}, {v_, &v_act_}};
    const nn::DeviceBuffer* d_of[] = {&dq_, &dk_, &dv_};
    for (int p = 0; p < 3; ++p) {
      const auto [table, act] = projections[p];
      PS_RETURN_IF_ERROR(device.LinearBackward(Rows(x_), params[table], Rows(*act),
                                               nn::Activation::kNone, Rows(*d_of[p]),
                                               grads[table], nullptr, tmp, accumulate));
      PS_RETURN_IF_ERROR(device.AddMatrix(tmp, dx));
    }
    PS_RETURN_IF_ERROR(device.SequenceInputsBackward(dx, seq, first_, max_length_, d_items,
                                                     grads[position_], d_target));
  }
  if (ready != nullptr) {
    for (auto it = tables.rbegin(); it != tables.rend(); ++it) (*ready)(it->first);
    (*ready)(position_);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
