#include "model/models/mlp.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

Mlp::Mlp(TableRegistry* registry, const std::string& prefix, int in, std::vector<int> widths,
         bool relu_last, uint64_t seed, bool dropout_hidden)
    : in_(in), dropout_hidden_(dropout_hidden) {
  for (char c : prefix) salt_ = nn::DropoutMix(salt_ ^ static_cast<uint8_t>(c));
  int fan_in = in;
  for (size_t i = 0; i < widths.size(); ++i) {
    Layer layer;
    layer.in = fan_in;
    layer.out = widths[i];
    layer.weight = registry->AddDense(absl::StrCat(prefix, ".", i, ".weight"),
                                      static_cast<uint64_t>(layer.out) * layer.in,
                                      LinearWeightInit(layer.in, seed));
    layer.bias = registry->AddDense(absl::StrCat(prefix, ".", i, ".bias"), layer.out,
                                    registry->BiasInit(layer.in, seed));
    const bool last = i + 1 == widths.size();
    layer.act = !last || relu_last ? nn::Activation::kRelu : nn::Activation::kNone;
    layers_.push_back(std::move(layer));
    fan_in = widths[i];
  }
}

absl::Status Mlp::Reserve(nn::Device* device, int batch) {
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    const size_t n = static_cast<size_t>(batch) * layers_[i].out;
    PS_RETURN_IF_ERROR(layers_[i].y.ReserveElements(device, n));
    PS_RETURN_IF_ERROR(layers_[i].dy.ReserveElements(device, n));
  }
  return absl::OkStatus();
}

absl::Status Mlp::Forward(nn::Device& device, nn::ConstMatrixView x,
                          const std::vector<const float*>& params, nn::MatrixView out,
                          const nn::DropoutRun& dropout) {
  dropped_rate_ = dropout_hidden_ ? dropout.rate : 0.0f;
  nn::ConstMatrixView input = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = layers_[i];
    const bool last = i + 1 == layers_.size();
    nn::MatrixView y = last ? out : nn::MatrixView(layer.y.as(), x.rows, layer.out);
    PS_RETURN_IF_ERROR(
        device.LinearForward(input, params[layer.weight], params[layer.bias], layer.act, y));
    if (!last && dropped_rate_ > 0.0f) {
      // Hidden layers are ReLU'd (the contract of DropoutBackward).
      PS_RETURN_IF_ERROR(device.DropoutForward(
          y, dropped_rate_, nn::DropoutMix(dropout.seed ^ nn::DropoutMix(salt_ + i)),
          dropout.first_row));
    }
    input = y;
  }
  return absl::OkStatus();
}

absl::Status Mlp::Backward(nn::Device& device, nn::ConstMatrixView x,
                           const std::vector<const float*>& params, nn::ConstMatrixView out,
                           nn::MatrixView d_out, const std::vector<float*>& grads,
                           nn::MatrixView dx, bool accumulate,
                           const std::function<void(uint32_t)>* ready) {
  const int rows = x.rows;
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& layer = layers_[i];
    const bool last = i + 1 == layers_.size();
    nn::ConstMatrixView input =
        i == 0 ? x : nn::ConstMatrixView(layers_[i - 1].y.as(), rows, layers_[i - 1].out);
    nn::ConstMatrixView y = last ? out : nn::ConstMatrixView(layer.y.as(), rows, layer.out);
    nn::MatrixView dy = last ? d_out : nn::MatrixView(layer.dy.as(), rows, layer.out);
    nn::MatrixView d_input =
        i == 0 ? dx : nn::MatrixView(layers_[i - 1].dy.as(), rows, layers_[i - 1].out);
    if (!last && dropped_rate_ > 0.0f) {
      PS_RETURN_IF_ERROR(device.DropoutBackward(y, dy, dropped_rate_));
    }
    PS_RETURN_IF_ERROR(device.LinearBackward(input, params[layer.weight], y, layer.act, dy,
                                             grads[layer.weight], grads[layer.bias], d_input,
                                             accumulate));
    if (ready != nullptr) {
      (*ready)(layer.weight);
      (*ready)(layer.bias);
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
