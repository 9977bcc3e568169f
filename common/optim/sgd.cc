// SGD with optional (Nesterov) momentum and L2 weight decay, in the form
// PyTorch uses:
//   g' = scale * g + weight_decay * w
//   momentum == 0:  w -= lr * g'
//   otherwise:      v = momentum * v + g'
//                   w -= lr * (nesterov ? g' + momentum * v : v)
#include "common/optim/kernels.h"
#include "common/optim/simd.h"

namespace pstrain::optim::internal {
namespace {

using simd::Vec;

struct PlainRule {
  float lr, wd, scale;
  Vec operator()(Vec w, Vec g, Vec* /*planes*/) const {
    Vec gw = g * scale + w * wd;
    return w - gw * lr;
  }
};

struct MomentumRule {
  float lr, wd, scale, mu;
  bool nesterov;
  Vec operator()(Vec w, Vec g, Vec* planes) const {
    Vec gw = g * scale + w * wd;
    Vec v = planes[0] * mu + gw;
    planes[0] = v;
    return nesterov ? w - (gw + v * mu) * lr : w - v * lr;
  }
};

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& config) : Optimizer(config) {}

  size_t StatePlanes() const override { return config().momentum > 0.0f ? 1 : 0; }

  void Apply(const UpdateArgs& a) const override {
    const OptimizerConfig& c = config();
    if (c.momentum > 0.0f) {
      MomentumRule rule{c.lr * a.lr_scale, c.weight_decay, a.scale, c.momentum, c.nesterov};
      simd::RunElementwise<1>(rule, a.weights_in, a.weights_out, a.state, a.state_stride,
                              a.grads, a.n);
    } else {
      PlainRule rule{c.lr * a.lr_scale, c.weight_decay, a.scale};
      simd::RunElementwise<0>(rule, a.weights_in, a.weights_out, a.state, a.state_stride,
                              a.grads, a.n);
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> NewSgd(const OptimizerConfig& config) {
  return std::make_unique<Sgd>(config);
}

}  // namespace pstrain::optim::internal
