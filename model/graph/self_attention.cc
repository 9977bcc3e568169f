#include "model/graph/self_attention.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

SelfAttention::SelfAttention(TableRegistry* registry, const std::string& name, int dim, int heads,
                             int max_length, uint64_t seed)
    : dim_(dim), heads_(heads), max_length_(max_length) {
  const uint64_t dd = static_cast<uint64_t>(dim) * dim;
  position_ = registry->AddDense(absl::StrCat(name, ".position"),
                                 static_cast<uint64_t>(max_length) * dim, EmbeddingInit(dim, seed));
  q_ = registry->AddDense(absl::StrCat(name, ".wq"), dd, LinearWeightInit(dim, seed));
  k_ = registry->AddDense(absl::StrCat(name, ".wk"), dd, LinearWeightInit(dim, seed));
  v_ = registry->AddDense(absl::StrCat(name, ".wv"), dd, LinearWeightInit(dim, seed));
  o_ = registry->AddDense(absl::StrCat(name, ".wo"), dd, LinearWeightInit(dim, seed));
}

absl::Status SelfAttention::Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                                    const std::vector<const float*>& params, nn::MatrixView out) {
  // The item count and the longest bag size the buffers: read on the host.
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (seq.host_offsets == nullptr && !device.host_memory()) {
    return absl::InternalError("self_attention: the bags' offsets are not on the host");
  }
  first_ = offsets[0];
  items_ = static_cast<int>(offsets[seq.batch] - first_);
  rows_ = seq.batch;
  max_n_ = 1;
  for (int b = 0; b < seq.batch; ++b) {
    max_n_ = std::max(max_n_, static_cast<int>(offsets[b + 1] - offsets[b]));
  }
  const size_t per_item = static_cast<size_t>(std::max(items_, 1)) * dim_;
  for (nn::DeviceBuffer* b : {&x_, &q_act_, &k_act_, &v_act_, &heads_out_, &y_}) {
    PS_RETURN_IF_ERROR(b->ReserveElements(&device, per_item));
  }
  PS_RETURN_IF_ERROR(weights_.ReserveElements(
      &device, static_cast<size_t>(std::max(items_, 1)) * heads_ * max_n_));
  if (items_ > 0) {
    const nn::MatrixView x = Rows(x_), y = Rows(y_);
    PS_RETURN_IF_ERROR(
        device.SequenceInputs(items, seq, first_, params[position_], max_length_, x));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[q_], nullptr, nn::Activation::kNone,
                                            Rows(q_act_)));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[k_], nullptr, nn::Activation::kNone,
                                            Rows(k_act_)));
    PS_RETURN_IF_ERROR(device.LinearForward(x, params[v_], nullptr, nn::Activation::kNone,
                                            Rows(v_act_)));
    PS_RETURN_IF_ERROR(device.SequenceAttention(Rows(q_act_), Rows(k_act_), Rows(v_act_), seq,
                                                first_, heads_, max_n_, weights_.as(),
                                                Rows(heads_out_)));
    PS_RETURN_IF_ERROR(device.LinearForward(Rows(heads_out_), params[o_], nullptr,
                                            nn::Activation::kNone, y));
    PS_RETURN_IF_ERROR(device.AddMatrix(x, y));  // the residual
  }
  return device.SequenceMean(Rows(y_), seq, first_, out);
}

absl::Status SelfAttention::Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                                     const std::vector<const float*>& params,
                                     nn::ConstMatrixView d_out, float* d_items,
                                     const std::vector<float*>& grads, bool accumulate,
                                     const std::function<void(uint32_t)>* ready) {
  (void)items;
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (seq.batch != rows_ || offsets[0] != first_ ||
      static_cast<int>(offsets[seq.batch] - first_) != items_) {
    return absl::InternalError("self_attention: backward of other rows than its forward");
  }
  const size_t dd = static_cast<size_t>(dim_) * dim_;
  if (!accumulate) {
    PS_RETURN_IF_ERROR(device.Zero(grads[position_],
                                   sizeof(float) * static_cast<size_t>(max_length_) * dim_));
    if (items_ == 0) {
      for (uint32_t t : {q_, k_, v_, o_}) PS_RETURN_IF_ERROR(device.Zero(grads[t], sizeof(float) * dd));
    }
  }
  if (items_ > 0) {
    const size_t per_item = static_cast<size_t>(items_) * dim_;
    for (nn::DeviceBuffer* b : {&dy_, &dx_, &dq_, &dk_, &dv_, &d_heads_, &d_tmp_}) {
      PS_RETURN_IF_ERROR(b->ReserveElements(&device, per_item));
    }
    const nn::MatrixView dy = Rows(dy_), dx = Rows(dx_), tmp = Rows(d_tmp_);
    // out = mean of Y's rows; Y = X + heads W_o^T: dX starts as dY.
    PS_RETURN_IF_ERROR(device.SequenceMeanBackward(d_out, seq, first_, dy));
    PS_RETURN_IF_ERROR(device.CopyMatrix(dy, dx));
    PS_RETURN_IF_ERROR(device.LinearBackward(Rows(heads_out_), params[o_], Rows(y_),
                                             nn::Activation::kNone, dy, grads[o_], nullptr,
                                             Rows(d_heads_), accumulate));
    PS_RETURN_IF_ERROR(device.SequenceAttentionBackward(
        Rows(q_act_), Rows(k_act_), Rows(v_act_), weights_.as(), Rows(d_heads_), seq, first_,
        heads_, max_n_, Rows(dq_), Rows(dk_), Rows(dv_)));
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
                                                     grads[position_]));
  }
  if (ready != nullptr) {
    for (uint32_t t : {o_, v_, k_, q_, position_}) (*ready)(t);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
