#include "model/models/mlp.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

namespace {

uint64_t DropoutSalt(const std::string& prefix) {
  uint64_t salt = 0;
  for (char c : prefix) salt = nn::DropoutMix(salt ^ static_cast<uint8_t>(c));
  return salt;
}

}  // namespace

std::vector<LinearSpec> DeclareLinearLayers(TableRegistry* registry, const std::string& prefix,
                                            int in, const std::vector<int>& widths,
                                            bool relu_last, uint64_t seed, bool he_hidden) {
  std::vector<LinearSpec> layers;
  int fan_in = in;
  for (size_t i = 0; i < widths.size(); ++i) {
    LinearSpec layer;
    layer.in = fan_in;
    layer.out = widths[i];
    layer.weight = registry->AddDense(absl::StrCat(prefix, ".", i, ".weight"),
                                      static_cast<uint64_t>(layer.out) * layer.in,
                                      he_hidden && i + 1 < widths.size()
                                          ? HeInit(layer.in, seed)
                                          : LinearWeightInit(layer.in, seed));
    layer.bias = registry->AddDense(absl::StrCat(prefix, ".", i, ".bias"), layer.out,
                                    registry->BiasInit(layer.in, seed));
    const bool last = i + 1 == widths.size();
    layer.act = !last || relu_last ? nn::Activation::kRelu : nn::Activation::kNone;
    layers.push_back(layer);
    fan_in = widths[i];
  }
  return layers;
}

Mlp::Mlp(TableRegistry* registry, const std::string& prefix, int in, std::vector<int> widths,
         bool relu_last, uint64_t seed, bool dropout_hidden, bool he_hidden)
    : stack_(DeclareLinearLayers(registry, prefix, in, widths, relu_last, seed, he_hidden),
             /*tp=*/nullptr, DropoutSalt(prefix)),
      dropout_hidden_(dropout_hidden) {}

absl::Status Mlp::Reserve(nn::Device* device, int batch) {
  return stack_.Reserve(device, batch, &acts_);
}

absl::Status Mlp::Forward(nn::Device& device, nn::ConstMatrixView x,
                          const std::vector<const float*>& params, nn::MatrixView out,
                          const nn::DropoutRun& dropout) {
  return stack_.Forward(device, x, params, &acts_, out,
                        dropout_hidden_ ? dropout : nn::DropoutRun{});
}

absl::Status Mlp::Backward(nn::Device& device, nn::ConstMatrixView x,
                           const std::vector<const float*>& params, nn::ConstMatrixView out,
                           nn::MatrixView d_out, const std::vector<float*>& grads,
                           nn::MatrixView dx, bool accumulate,
                           const std::function<void(uint32_t)>* ready) {
  return stack_.Backward(device, x, params, acts_, out, d_out, grads, dx, accumulate, ready);
}

}  // namespace pstrain::worker
