#include "model/graph/mixture_of_experts.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

Experts::Experts(TableRegistry* registry, const std::string& name, int in, int count,
                 const std::vector<int>& widths, uint64_t seed)
    : width_(widths.back()) {
  for (int e = 0; e < count; ++e) {
    experts_.push_back(std::make_unique<Mlp>(registry, absl::StrCat(name, ".", e), in, widths,
                                             /*relu_last=*/true, seed));
  }
}

absl::Status Experts::Reserve(nn::Device* device, int rows) {
  for (auto& e : experts_) PS_RETURN_IF_ERROR(e->Reserve(device, rows));
  return absl::OkStatus();
}

absl::Status Experts::Forward(nn::Device& device, nn::ConstMatrixView x,
                              const std::vector<const float*>& params, nn::MatrixView out) {
  for (size_t e = 0; e < experts_.size(); ++e) {
    PS_RETURN_IF_ERROR(experts_[e]->Forward(device, x, params, out.Columns(static_cast<int>(e) * width_, width_)));
  }
  return absl::OkStatus();
}

absl::Status Experts::Backward(nn::Device& device, nn::ConstMatrixView x,
                               const std::vector<const float*>& params, nn::ConstMatrixView out,
                               nn::MatrixView d_out, const std::vector<float*>& grads,
                               nn::MatrixView dx, bool accumulate,
                               const std::function<void(uint32_t)>* ready) {
  // The first expert writes dx, the others a scratch summed into it.
  nn::MatrixView scratch;
  if (dx.data != nullptr && experts_.size() > 1) {
    dx_scratch_.resize(static_cast<size_t>(x.rows) * x.cols);
    scratch = nn::MatrixView(dx_scratch_.data(), x.rows, x.cols);
  }
  for (size_t e = 0; e < experts_.size(); ++e) {
    const int c = static_cast<int>(e) * width_;
    PS_RETURN_IF_ERROR(experts_[e]->Backward(device, x, params, out.Columns(c, width_),
                                             d_out.Columns(c, width_), grads,
                                             e == 0 ? dx : scratch, accumulate, ready));
    if (e > 0 && dx.data != nullptr) PS_RETURN_IF_ERROR(device.AddMatrix(scratch, dx));
  }
  return absl::OkStatus();
}

ExpertGate::ExpertGate(TableRegistry* registry, const std::string& name, int gate_in, int experts,
                       int width, uint64_t seed)
    : gate_in_(gate_in),
      experts_(experts),
      width_(width),
      gate_(registry, name, gate_in, std::vector<int>{experts}, /*relu_last=*/false, seed) {}

absl::Status ExpertGate::Forward(nn::Device& device, nn::ConstMatrixView x,
                                 const std::vector<const float*>& params, nn::MatrixView out) {
  if (!device.host_memory()) return absl::UnimplementedError("gate runs on the CPU device in this build");
  const int rows = x.rows;
  const int k = experts_;
  logits_.resize(static_cast<size_t>(rows) * k);
  weights_.resize(static_cast<size_t>(rows) * k);
  PS_RETURN_IF_ERROR(gate_.Reserve(&device, rows));
  PS_RETURN_IF_ERROR(gate_.Forward(device, x.Columns(0, gate_in_), params,
                                   nn::MatrixView(logits_.data(), rows, k)));
  for (int r = 0; r < rows; ++r) {
    const float* z = logits_.data() + static_cast<size_t>(r) * k;
    float* g = weights_.data() + static_cast<size_t>(r) * k;
    const float top = *std::max_element(z, z + k);
    float sum = 0;
    for (int e = 0; e < k; ++e) sum += (g[e] = std::exp(z[e] - top));
    for (int e = 0; e < k; ++e) g[e] /= sum;
    float* o = out.row(r);
    std::fill(o, o + width_, 0.0f);
    const float* y = x.row(r) + gate_in_;
    for (int e = 0; e < k; ++e) {
      const float ge = g[e];
      const float* ye = y + static_cast<size_t>(e) * width_;
      for (int c = 0; c < width_; ++c) o[c] += ge * ye[c];
    }
  }
  return absl::OkStatus();
}

absl::Status ExpertGate::Backward(nn::Device& device, nn::ConstMatrixView x,
                                  const std::vector<const float*>& params,
                                  nn::ConstMatrixView d_out, const std::vector<float*>& grads,
                                  nn::MatrixView dx, bool accumulate,
                                  const std::function<void(uint32_t)>* ready) {
  if (dx.data == nullptr) return absl::InternalError("gate: no dL/dx to write");
  const int rows = x.rows;
  const int k = experts_;
  d_logits_.resize(static_cast<size_t>(rows) * k);
  for (int r = 0; r < rows; ++r) {
    const float* g = weights_.data() + static_cast<size_t>(r) * k;
    float* dz = d_logits_.data() + static_cast<size_t>(r) * k;
    const float* d = d_out.row(r);
    const float* y = x.row(r) + gate_in_;
    float* dy = dx.row(r) + gate_in_;
    // dL/dy_e = g_e dL/dout; dL/dg_e = <dL/dout, y_e>; through the softmax
    // dL/dz_e = g_e (dL/dg_e - sum_j g_j dL/dg_j).
    float mean = 0;
    for (int e = 0; e < k; ++e) {
      const float* ye = y + static_cast<size_t>(e) * width_;
      float* dye = dy + static_cast<size_t>(e) * width_;
      float dg = 0;
      for (int c = 0; c < width_; ++c) {
        dg += d[c] * ye[c];
        dye[c] = g[e] * d[c];
      }
      dz[e] = dg;
      mean += g[e] * dg;
    }
    for (int e = 0; e < k; ++e) dz[e] = g[e] * (dz[e] - mean);
  }
  return gate_.Backward(device, x.Columns(0, gate_in_), params,
                        nn::ConstMatrixView(logits_.data(), rows, k),
                        nn::MatrixView(d_logits_.data(), rows, k), grads, dx.Columns(0, gate_in_),
                        accumulate, ready);
}

}  // namespace pstrain::worker
