// Adam (Kingma & Ba 2015) with L2 weight decay added to the gradient:
//   g' = scale * g + weight_decay * w
//   m = beta1 * m + (1 - beta1) * g'
//   v = beta2 * v + (1 - beta2) * g'^2
//   w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// t is UpdateArgs::step: per row for sparse tables, per shard for dense ones.
#include <cmath>
#include <vector>

#include "common/optim/kernels.h"
#include "common/optim/simd.h"

namespace pstrain::optim::internal {
namespace {

using simd::Vec;

struct AdamRule {
  float lr, wd, eps, scale, b1, b2, c1, c2;  // c1, c2: 1 / (1 - beta^t)
  Vec operator()(Vec w, Vec g, Vec* planes) const {
    Vec gw = g * scale + w * wd;
    Vec m = planes[0] * b1 + gw * (1.0f - b1);
    Vec v = planes[1] * b2 + gw * gw * (1.0f - b2);
    planes[0] = m;
    planes[1] = v;
    return w - (m * c1) * lr / (simd::Sqrt(v * c2) + eps);
  }
};

// 1 / (1 - beta^t) as a float.
float BiasCorrection(float beta, uint64_t t) {
  return static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta), static_cast<double>(t))));
}

class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerConfig& config) : Optimizer(config) {
    // Sparse rows mostly have small step counts; a table spares two pow()
    // calls per row update (a third of its cost at dim 16).
    c1_.resize(kTableSteps + 1);
    c2_.resize(kTableSteps + 1);
    for (uint64_t t = 1; t <= kTableSteps; ++t) {
      c1_[t] = BiasCorrection(config.beta1, t);
      c2_[t] = BiasCorrection(config.beta2, t);
    }
  }

  size_t StatePlanes() const override { return 2; }
  bool uses_step() const override { return true; }

  void Apply(const UpdateArgs& a) const override {
    const OptimizerConfig& c = config();
    const uint64_t t = a.step == 0 ? 1 : a.step;
    const float c1 = t <= kTableSteps ? c1_[t] : BiasCorrection(c.beta1, t);
    const float c2 = t <= kTableSteps ? c2_[t] : BiasCorrection(c.beta2, t);
    AdamRule rule{c.lr * a.lr_scale, c.weight_decay, c.eps, a.scale, c.beta1, c.beta2, c1, c2};
    simd::RunElementwise<2>(rule, a.weights_in, a.weights_out, a.state, a.state_stride, a.grads,
                            a.n);
  }

 private:
  static constexpr uint64_t kTableSteps = 1024;
  std::vector<float> c1_, c2_;  // BiasCorrection(beta, t) for t <= kTableSteps
};

}  // namespace

std::unique_ptr<Optimizer> NewAdam(const OptimizerConfig& config) {
  return std::make_unique<Adam>(config);
}

}  // namespace pstrain::optim::internal
