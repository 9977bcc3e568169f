#include "model/graph/mixture_of_experts.h"

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
    PS_RETURN_IF_ERROR(dx_scratch_.ReserveElements(&device, static_cast<size_t>(x.rows) * x.cols));
    scratch = nn::MatrixView(dx_scratch_.as(), x.rows, x.cols);
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
  const int rows = x.rows;
  const int k = experts_;
  PS_RETURN_IF_ERROR(logits_.ReserveElements(&device, static_cast<size_t>(rows) * k));
  PS_RETURN_IF_ERROR(weights_.ReserveElements(&device, static_cast<size_t>(rows) * k));
  PS_RETURN_IF_ERROR(gate_.Reserve(&device, rows));
  const nn::MatrixView z(logits_.as(), rows, k);
  PS_RETURN_IF_ERROR(gate_.Forward(device, x.Columns(0, gate_in_), params, z));
  return device.ExpertMixForward(z, x.Columns(gate_in_, k * width_),
                                 nn::MatrixView(weights_.as(), rows, k), out);
}

absl::Status ExpertGate::Backward(nn::Device& device, nn::ConstMatrixView x,
                                  const std::vector<const float*>& params,
                                  nn::ConstMatrixView d_out, const std::vector<float*>& grads,
                                  nn::MatrixView dx, bool accumulate,
                                  const std::function<void(uint32_t)>* ready) {
  if (dx.data == nullptr) return absl::InternalError("gate: no dL/dx to write");
  const int rows = x.rows;
  const int k = experts_;
  PS_RETURN_IF_ERROR(d_logits_.ReserveElements(&device, static_cast<size_t>(rows) * k));
  const nn::MatrixView dz(d_logits_.as(), rows, k);
  PS_RETURN_IF_ERROR(device.ExpertMixBackward(nn::ConstMatrixView(weights_.as(), rows, k),
                                              x.Columns(gate_in_, k * width_), d_out, dz,
                                              dx.Columns(gate_in_, k * width_)));
  return gate_.Backward(device, x.Columns(0, gate_in_), params,
                        nn::ConstMatrixView(logits_.as(), rows, k), dz, grads,
                        dx.Columns(0, gate_in_), accumulate, ready);
}

}  // namespace pstrain::worker
