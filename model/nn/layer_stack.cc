#include "model/nn/layer_stack.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

namespace {

// Sums a contiguous [rows x cols] activation over the tensor-parallel group.
absl::Status SumOverGroup(Collective* tp, nn::MatrixView m, const char* what) {
  if (tp == nullptr) {
    return absl::InternalError(absl::StrCat("a split layer without its group (", what, ")"));
  }
  if (m.stride != m.cols) {
    return absl::InternalError(absl::StrCat("a strided ", what, " cannot be all-reduced"));
  }
  return tp->AllReduce(m.data, static_cast<size_t>(m.rows) * m.cols, ReduceOp::kSum);
}

}  // namespace

LayerStack::LayerStack(std::vector<LinearSpec> layers, Collective* tp, uint64_t dropout_salt)
    : layers_(std::move(layers)), tp_(tp), dropout_salt_(dropout_salt), dy_(layers_.size()) {}

std::vector<uint32_t> LayerStack::table_ids() const {
  std::vector<uint32_t> ids;
  for (const LinearSpec& l : layers_) {
    ids.push_back(l.weight);
    ids.push_back(l.bias);
  }
  return ids;
}

absl::Status LayerStack::Reserve(nn::Device* device, int rows, StackActivations* acts) {
  if (acts->hidden.size() < layers_.size()) acts->hidden.resize(layers_.size());
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    const size_t n = static_cast<size_t>(rows) * layers_[i].out;
    PS_RETURN_IF_ERROR(acts->hidden[i].ReserveElements(device, n));
    PS_RETURN_IF_ERROR(dy_[i].ReserveElements(device, n));
  }
  return absl::OkStatus();
}

absl::Status LayerStack::Forward(nn::Device& device, nn::ConstMatrixView x,
                                 const std::vector<const float*>& params, StackActivations* acts,
                                 nn::MatrixView out, const nn::DropoutRun& dropout) const {
  const int rows = x.rows;
  if (acts->hidden.size() < layers_.size()) acts->hidden.resize(layers_.size());
  acts->dropped_rate = dropout.rate;
  nn::ConstMatrixView input = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LinearSpec& l = layers_[i];
    nn::MatrixView y = out;
    if (i + 1 < layers_.size()) {
      PS_RETURN_IF_ERROR(
          acts->hidden[i].ReserveElements(&device, static_cast<size_t>(rows) * l.out));
      y = nn::MatrixView(acts->hidden[i].as(), rows, l.out);
    }
    if (l.split == TpSplit::kRow) {
      // Partial sums of x_slice W_slice^T (+ b once), summed over the group,
      // then the activation.
      const float* bias = tp_ != nullptr && tp_->rank() == 0 ? params[l.bias] : nullptr;
      PS_RETURN_IF_ERROR(
          device.LinearForward(input, params[l.weight], bias, nn::Activation::kNone, y));
      PS_RETURN_IF_ERROR(SumOverGroup(tp_, y, "row-parallel output"));
      if (l.act == nn::Activation::kRelu) PS_RETURN_IF_ERROR(device.ReluForward(y, y));
    } else {
      PS_RETURN_IF_ERROR(
          device.LinearForward(input, params[l.weight], params[l.bias], l.act, y));
    }
    if (i + 1 < layers_.size() && dropout.rate > 0.0f) {
      PS_RETURN_IF_ERROR(device.DropoutForward(
          y, dropout.rate, nn::DropoutMix(dropout.seed ^ nn::DropoutMix(dropout_salt_ + i)),
          dropout.first_row));
    }
    input = y;
  }
  return absl::OkStatus();
}

absl::Status LayerStack::Backward(nn::Device& device, nn::ConstMatrixView x,
                                  const std::vector<const float*>& params,
                                  const StackActivations& acts, nn::ConstMatrixView out,
                                  nn::MatrixView d_out, const std::vector<float*>& grads,
                                  nn::MatrixView dx, bool accumulate,
                                  const std::function<void(uint32_t)>* ready) {
  const int rows = x.rows;
  for (size_t i = layers_.size(); i-- > 0;) {
    const LinearSpec& l = layers_[i];
    const bool last = i + 1 == layers_.size();
    nn::ConstMatrixView input =
        i == 0 ? x : nn::ConstMatrixView(acts.hidden[i - 1].as(), rows, layers_[i - 1].out);
    nn::ConstMatrixView y = last ? out : nn::ConstMatrixView(acts.hidden[i].as(), rows, l.out);
    nn::MatrixView dy = last ? d_out : nn::MatrixView(dy_[i].as(), rows, l.out);
    nn::MatrixView d_input = dx;
    if (i > 0) {
      PS_RETURN_IF_ERROR(
          dy_[i - 1].ReserveElements(&device, static_cast<size_t>(rows) * layers_[i - 1].out));
      d_input = nn::MatrixView(dy_[i - 1].as(), rows, layers_[i - 1].out);
    }
    if (!last && acts.dropped_rate > 0.0f) {
      PS_RETURN_IF_ERROR(device.DropoutBackward(y, dy, acts.dropped_rate));
    }
    PS_RETURN_IF_ERROR(device.LinearBackward(input, params[l.weight], y, l.act, dy, grads[l.weight],
                                             grads[l.bias], d_input, accumulate));
    // A column layer saw the whole input: its input gradient is the sum of
    // every rank's share.
    if (l.split == TpSplit::kColumn && d_input.data != nullptr) {
      PS_RETURN_IF_ERROR(SumOverGroup(tp_, d_input, "column-parallel input gradient"));
    }
    if (ready != nullptr) {
      (*ready)(l.weight);
      (*ready)(l.bias);
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
