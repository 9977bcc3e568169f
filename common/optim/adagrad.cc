// Adagrad, per element and row-wise.
//   g' = scale * g + weight_decay * w
//   per element:  a += g'^2                   w -= lr * g' / (sqrt(a) + eps)
//   row-wise:     a += mean over the row of g'^2, then the same with one a
// The row-wise form keeps one float of state per sparse row instead of dim.
#include <algorithm>
#include <cmath>

#include "common/optim/kernels.h"
#include "common/optim/simd.h"

namespace pstrain::optim::internal {
namespace {

using simd::Vec;

struct AdagradRule {
  float lr, wd, eps, scale;
  Vec operator()(Vec w, Vec g, Vec* planes) const {
    Vec gw = g * scale + w * wd;
    Vec acc = planes[0] + gw * gw;
    planes[0] = acc;
    return w - gw * lr / (simd::Sqrt(acc) + eps);
  }
};

class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerConfig& config) : Optimizer(config) {}

  size_t StatePlanes() const override { return 1; }

  void InitState(float* state, size_t /*state_stride*/, size_t n) const override {
    std::fill(state, state + n, config().initial_accumulator);
  }

  void Apply(const UpdateArgs& a) const override {
    const OptimizerConfig& c = config();
    AdagradRule rule{c.lr * a.lr_scale, c.weight_decay, c.eps, a.scale};
    simd::RunElementwise<1>(rule, a.weights_in, a.weights_out, a.state, a.state_stride, a.grads,
                            a.n);
  }
};

// Second pass of row-wise Adagrad: w -= step * g' with the row's step size.
struct RowStepRule {
  float wd, scale, step;
  Vec operator()(Vec w, Vec g, Vec* /*planes*/) const {
    Vec gw = g * scale + w * wd;
    return w - gw * step;
  }
};

class RowwiseAdagrad final : public Optimizer {
 public:
  explicit RowwiseAdagrad(const OptimizerConfig& config) : Optimizer(config) {}

  size_t StatePlanes() const override { return 0; }
  bool row_wise() const override { return true; }

  void InitState(float* state, size_t /*state_stride*/, size_t /*n*/) const override {
    state[0] = config().initial_accumulator;
  }

  void Apply(const UpdateArgs& a) const override {
    if (a.n == 0) return;
    const OptimizerConfig& c = config();
    // Pass 1: sum of g'^2 over the row (zero-padded tail lanes add 0).
    Vec sum = {};
    size_t i = 0;
    for (; i + simd::kWidth <= a.n; i += simd::kWidth) {
      Vec gw = simd::Load(a.grads + i) * a.scale + simd::Load(a.weights_in + i) * c.weight_decay;
      sum += gw * gw;
    }
    if (i < a.n) {
      size_t r = a.n - i;
      Vec gw = simd::LoadPartial(a.grads + i, r) * a.scale +
              simd::LoadPartial(a.weights_in + i, r) * c.weight_decay;
      sum += gw * gw;
    }
    float acc = a.state[0] + simd::HorizontalSum(sum) / static_cast<float>(a.n);
    a.state[0] = acc;
    // Pass 2: the update with one step size for the whole row.
    RowStepRule rule{c.weight_decay, a.scale, c.lr * a.lr_scale / (std::sqrt(acc) + c.eps)};
    simd::RunElementwise<0>(rule, a.weights_in, a.weights_out, nullptr, 0, a.grads, a.n);
  }
};

}  // namespace

std::unique_ptr<Optimizer> NewAdagrad(const OptimizerConfig& config) {
  return std::make_unique<Adagrad>(config);
}

std::unique_ptr<Optimizer> NewRowwiseAdagrad(const OptimizerConfig& config) {
  return std::make_unique<RowwiseAdagrad>(config);
}

}  // namespace pstrain::optim::internal
