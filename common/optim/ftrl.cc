// FTRL-Proximal (McMahan et al., "Ad Click Prediction: a View from the
// Trenches", KDD 2013, Algorithm 1), per coordinate with alpha = lr:
//   g     = scale * g
//   sigma = (sqrt(n + g^2) - sqrt(n)) / alpha
//   z    += g - sigma * w
//   n    += g^2
//   w     = |z| <= l1 ? 0 : -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2)
// w in the z update is the stored weight, so rows that start from a random
// initializer behave like a gradient step from that point. As in the paper
// (and TensorFlow), every element of an update is recomputed from z and n,
// including elements whose gradient is 0: one that never had a non-zero
// gradient has z = 0 and becomes exactly 0 (FTRL models start from zeros).
#include "common/optim/kernels.h"
#include "common/optim/simd.h"

namespace pstrain::optim::internal {
namespace {

using simd::Vec;

struct FtrlRule {
  float inv_alpha, beta, l1, l2, scale;
  Vec operator()(Vec w, Vec g, Vec* planes) const {
    Vec gs = g * scale;
    Vec n_old = planes[1];
    Vec n_new = n_old + gs * gs;
    Vec sqrt_new = simd::Sqrt(n_new);
    Vec sigma = (sqrt_new - simd::Sqrt(n_old)) * inv_alpha;
    Vec z = planes[0] + gs - sigma * w;
    planes[0] = z;
    planes[1] = n_new;
    Vec shrunk = z - (z < 0.0f ? simd::Splat(-l1) : simd::Splat(l1));
    Vec w_new = -shrunk / ((sqrt_new + beta) * inv_alpha + l2);
    return simd::Abs(z) <= l1 ? Vec{} : w_new;
  }
};

class Ftrl final : public Optimizer {
 public:
  explicit Ftrl(const OptimizerConfig& config) : Optimizer(config) {}

  size_t StatePlanes() const override { return 2; }  // z, n

  void Apply(const UpdateArgs& a) const override {
    const OptimizerConfig& c = config();
    FtrlRule rule{1.0f / (c.lr * a.lr_scale), c.ftrl_beta, c.ftrl_l1, c.ftrl_l2, a.scale};
    simd::RunElementwise<2>(rule, a.weights_in, a.weights_out, a.state, a.state_stride, a.grads,
                            a.n);
  }
};

}  // namespace

std::unique_ptr<Optimizer> NewFtrl(const OptimizerConfig& config) {
  return std::make_unique<Ftrl>(config);
}

}  // namespace pstrain::optim::internal
