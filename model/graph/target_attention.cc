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
  if (!device.host_memory()) {
    return absl::UnimplementedError("target_attention runs on the CPU device in this build");
  }
  const int rows = seq.batch;
  const int d = dim_;
  const uint32_t first = seq.offsets[0];
  items_ = static_cast<int>(seq.offsets[rows] - first);
  features_.resize(static_cast<size_t>(std::max(items_, 1)) * 4 * d);
  scores_.resize(std::max(items_, 1));
  // One feature row per item: [h, t, h - t, h * t].
  for (int b = 0; b < rows; ++b) {
    const float* t = target.row(b);
    for (uint32_t k = seq.offsets[b]; k < seq.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(seq.index[k]) * d;
      float* f = features_.data() + static_cast<size_t>(k - first) * 4 * d;
      for (int c = 0; c < d; ++c) {
        f[c] = h[c];
        f[d + c] = t[c];
        f[2 * d + c] = h[c] - t[c];
        f[3 * d + c] = h[c] * t[c];
      }
    }
  }
  if (items_ > 0) {
    PS_RETURN_IF_ERROR(mlp_.Forward(device, nn::ConstMatrixView(features_.data(), items_, 4 * d),
                                    params, &acts_, nn::MatrixView(scores_.data(), items_, 1)));
  }
  for (int b = 0; b < rows; ++b) {
    float* o = out.row(b);
    std::fill(o, o + d, 0.0f);
    for (uint32_t k = seq.offsets[b]; k < seq.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(seq.index[k]) * d;
      const float s = scores_[k - first];
      for (int c = 0; c < d; ++c) o[c] += s * h[c];
    }
  }
  return absl::OkStatus();
}

absl::Status TargetAttention::Backward(nn::Device& device, const float* items,
                                       const nn::Bags& seq, nn::ConstMatrixView target,
                                       const std::vector<const float*>& params,
                                       nn::ConstMatrixView d_out, float* d_items,
                                       nn::MatrixView d_target, const std::vector<float*>& grads,
                                       bool accumulate,
                                       const std::function<void(uint32_t)>* ready) {
  const int rows = seq.batch;
  const int d = dim_;
  const uint32_t first = seq.offsets[0];
  if (static_cast<int>(seq.offsets[rows] - first) != items_) {
    return absl::InternalError("target_attention: backward of other rows than its forward");
  }
  d_scores_.resize(std::max(items_, 1));
  d_features_.resize(static_cast<size_t>(std::max(items_, 1)) * 4 * d);
  // dL/dscore of an item: <dL/dout of its row, h>.
  for (int b = 0; b < rows; ++b) {
    const float* g = d_out.row(b);
    for (uint32_t k = seq.offsets[b]; k < seq.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(seq.index[k]) * d;
      float s = 0.0f;
      for (int c = 0; c < d; ++c) s += g[c] * h[c];
      d_scores_[k - first] = s;
    }
  }
  if (items_ > 0) {
    PS_RETURN_IF_ERROR(mlp_.Backward(
        device, nn::ConstMatrixView(features_.data(), items_, 4 * d), params, acts_,
        nn::ConstMatrixView(scores_.data(), items_, 1), nn::MatrixView(d_scores_.data(), items_, 1),
        grads, nn::MatrixView(d_features_.data(), items_, 4 * d), accumulate, ready));
  } else {
    // No item in these rows: the MLP's gradients are zero (or unchanged).
    for (const LinearSpec& l : mlp_.layers()) {
      if (accumulate) continue;
      std::fill(grads[l.weight], grads[l.weight] + static_cast<size_t>(l.in) * l.out, 0.0f);
      std::fill(grads[l.bias], grads[l.bias] + l.out, 0.0f);
    }
  }
  for (int b = 0; b < rows; ++b) {
    const float* g = d_out.row(b);
    const float* t = target.row(b);
    float* dt = d_target.data != nullptr ? d_target.row(b) : nullptr;
    if (dt != nullptr) std::fill(dt, dt + d, 0.0f);
    for (uint32_t k = seq.offsets[b]; k < seq.offsets[b + 1]; ++k) {
      const float* h = items + static_cast<size_t>(seq.index[k]) * d;
      float* dh = d_items + static_cast<size_t>(seq.index[k]) * d;
      const float s = scores_[k - first];
      const float* df = d_features_.data() + static_cast<size_t>(k - first) * 4 * d;
      for (int c = 0; c < d; ++c) {
        // out = s h; features [h, t, h - t, h * t].
        dh[c] += s * g[c] + df[c] + df[2 * d + c] + df[3 * d + c] * t[c];
        if (dt != nullptr) dt[c] += df[d + c] - df[2 * d + c] + df[3 * d + c] * h[c];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
