#include "model/graph/target_attention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/mlp.h"

namespace pstrain::worker {
namespace {

std::vector<int> WithScore(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

}  // namespace

TargetAttention::TargetAttention(TableRegistry* registry, const std::string& name, int dim,
                                 const std::vector<int>& widths, uint64_t seed)
    : dim_(dim),
      mlp_(DeclareLinearLayers(registry, name, 4 * dim, WithScore(widths), /*relu_last=*/false,
                               seed)) {}

absl::Status TargetAttention::Forward(nn::Device& device, const float* items,
                                      const nn::Bags& seq, nn::ConstMatrixView target,
                                      const std::vector<const float*>& params,
                                      nn::MatrixView out) {
  // The item count sizes the scoring MLP's rows: read on the host.
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (seq.host_offsets == nullptr && !device.host_memory()) {
    return absl::InternalError("target_attention: the bags' offsets are not on the host");
  }
  const int d = dim_;
  first_ = offsets[0];
  items_ = static_cast<int>(offsets[seq.batch] - first_);
  const size_t n = static_cast<size_t>(std::max(items_, 1));
  PS_RETURN_IF_ERROR(features_.ReserveElements(&device, n * 4 * d));
  PS_RETURN_IF_ERROR(scores_.ReserveElements(&device, n));
  if (items_ > 0) {
    // One feature row per item, [h, t, h - t, h * t], scored by the MLP.
    PS_RETURN_IF_ERROR(device.AttentionFeatures(items, seq, first_, target, Features()));
    PS_RETURN_IF_ERROR(mlp_.Forward(device, Features(), params, &acts_,
                                    nn::MatrixView(scores_.as(), items_, 1)));
  }
  return device.WeightedBagSum(items, seq, first_, scores_.as(), out);
}

absl::Status TargetAttention::Backward(nn::Device& device, const float* items,
                                       const nn::Bags& seq, nn::ConstMatrixView target,
                                       const std::vector<const float*>& params,
                                       nn::ConstMatrixView d_out, float* d_items,
                                       nn::MatrixView d_target, const std::vector<float*>& grads,
                                       bool accumulate,
                                       const std::function<void(uint32_t)>* ready) {
  const uint32_t* offsets = seq.host_offsets != nullptr ? seq.host_offsets : seq.offsets;
  if (offsets[0] != first_ || static_cast<int>(offsets[seq.batch] - first_) != items_) {
    return absl::InternalError("target_attention: backward of other rows than its forward");
  }
  const int d = dim_;
  const size_t n = static_cast<size_t>(std::max(items_, 1));
  PS_RETURN_IF_ERROR(d_scores_.ReserveElements(&device, n));
  PS_RETURN_IF_ERROR(d_features_.ReserveElements(&device, n * 4 * d));
  nn::MatrixView d_features(d_features_.as(), items_, 4 * d);
  if (items_ > 0) {
    // dL/dscore of an item: <dL/dout of its row, h>; then through the MLP.
    PS_RETURN_IF_ERROR(device.WeightedBagDot(d_out, items, seq, first_, d_scores_.as()));
    PS_RETURN_IF_ERROR(mlp_.Backward(device, Features(), params, acts_,
                                     nn::ConstMatrixView(scores_.as(), items_, 1),
                                     nn::MatrixView(d_scores_.as(), items_, 1), grads, d_features,
                                     accumulate, ready));
  } else if (!accumulate) {
    // No item in these rows: the MLP's gradients are zero.
    for (const LinearSpec& l : mlp_.layers()) {
      PS_RETURN_IF_ERROR(device.Zero(grads[l.weight], sizeof(float) * l.in * l.out));
      PS_RETURN_IF_ERROR(device.Zero(grads[l.bias], sizeof(float) * l.out));
    }
  }
  return device.AttentionPoolingBackward(d_out, d_features, items, seq, first_, scores_.as(),
                                         target, d_items, d_target);
}

}  // namespace pstrain::worker
