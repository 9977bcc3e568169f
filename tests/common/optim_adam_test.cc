// Adam against its formula (see common/optim/adam.cc), in double.
#include <cmath>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

// The hyperparameters as the optimizer sees them (float), widened to double.
constexpr double kB1 = 0.9f, kB2 = 0.999f, kEps = 1e-8f;

std::unique_ptr<Optimizer> MakeAdam(float lr, float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  c.lr = lr;
  c.weight_decay = wd;
  c.beta1 = static_cast<float>(kB1);
  c.beta2 = static_cast<float>(kB2);
  c.eps = static_cast<float>(kEps);
  auto opt = Optimizer::Create(c);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

// Weights w (n) and state [m (n)][v (n)], one row.
void Step(const Optimizer& opt, std::vector<float>& w, std::vector<float>& state,
          const std::vector<float>& g, float scale, uint64_t step) {
  UpdateArgs a;
  a.weights_in = w.data();
  a.weights_out = w.data();
  a.state = state.data();
  a.state_stride = w.size();
  a.grads = g.data();
  a.n = w.size();
  a.scale = scale;
  a.step = step;
  opt.Apply(a);
}

struct Reference {
  double lr, wd;
  std::vector<double> w, m, v;
  void Step(const std::vector<float>& g, double scale, uint64_t t) {
    for (size_t i = 0; i < w.size(); ++i) {
      double gw = scale * g[i] + wd * w[i];
      m[i] = kB1 * m[i] + (1 - kB1) * gw;
      v[i] = kB2 * v[i] + (1 - kB2) * gw * gw;
      double mhat = m[i] / (1 - std::pow(kB1, t));
      double vhat = v[i] / (1 - std::pow(kB2, t));
      w[i] -= lr * mhat / (std::sqrt(vhat) + kEps);
    }
  }
};

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Adam, FirstStepMovesEachWeightByLearningRateAgainstGradientSign) {
  // t = 1: m^ = g', v^ = g'^2, so the step is lr * g' / (|g'| + eps).
  auto opt = MakeAdam(0.01f, 0.0f);
  std::vector<float> w = {1.0f, 1.0f, 1.0f}, state(6, 0.0f);
  Step(*opt, w, state, {3.0f, -0.5f, 40.0f}, 1.0f, 1);
  ExpectNear(w, {0.99, 1.01, 0.99}, 1e-6);
  const double a = 1 - kB1, b = 1 - kB2;
  ExpectNear(state, {a * 3, a * -0.5, a * 40, b * 9, b * 0.25, b * 1600}, 1e-6);
}

TEST(Adam, MatchesReferenceOverStepsWithWeightDecay) {
  const int n = 11;
  auto opt = MakeAdam(0.01f, 0.1f);
  std::vector<float> w(n), state(2 * n, 0.0f), g(n);
  Reference ref{0.01, 0.1, std::vector<double>(n), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
  for (int i = 0; i < n; ++i) ref.w[i] = w[i] = static_cast<float>(0.2 * i - 1.0);
  for (uint64_t t = 1; t <= 5; ++t) {
    for (int i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(0.9 * i + t) * 4);
    Step(*opt, w, state, g, 0.25f, t);
    ref.Step(g, 0.25, t);
  }
  ExpectNear(w, ref.w, 2e-6);
}

TEST(Adam, BiasCorrectionFollowsTheGivenStepCount) {
  // Rows updated for the first time at different global times still get the
  // t = 1 correction when their own count is 1; a row at t = 7 does not.
  auto opt = MakeAdam(0.01f, 0.0f);
  std::vector<float> fresh = {0.0f}, fresh_state = {0.0f, 0.0f};
  std::vector<float> old = {0.0f}, old_state = {0.0f, 0.0f};
  Step(*opt, fresh, fresh_state, {2.0f}, 1.0f, 1);
  Step(*opt, old, old_state, {2.0f}, 1.0f, 7);
  EXPECT_NEAR(fresh[0], -0.01, 1e-7);
  // m = 2 (1 - b1), v = 4 (1 - b2); m^ = m / (1 - b1^7), v^ = v / (1 - b2^7).
  double mhat = 2 * (1 - kB1) / (1 - std::pow(kB1, 7));
  double vhat = 4 * (1 - kB2) / (1 - std::pow(kB2, 7));
  EXPECT_NEAR(old[0], -0.01 * mhat / (std::sqrt(vhat) + kEps), 1e-7);
  EXPECT_GT(std::abs(old[0] - fresh[0]), 1e-3);
}

TEST(Adam, PlanesMayLieFarApartForDenseRanges) {
  // A dense shard updates a sub-range whose m and v planes are `stride` apart.
  auto opt = MakeAdam(0.01f, 0.0f);
  const size_t length = 10, off = 4, n = 3;
  std::vector<float> w(length, 1.0f), state(2 * length, 0.0f), g(n, 1.0f);
  UpdateArgs a;
  a.weights_in = w.data() + off;
  a.weights_out = w.data() + off;
  a.state = state.data() + off;
  a.state_stride = length;
  a.grads = g.data();
  a.n = n;
  a.step = 1;
  opt->Apply(a);
  for (size_t i = 0; i < length; ++i) {
    bool inside = i >= off && i < off + n;
    EXPECT_NEAR(w[i], inside ? 0.99 : 1.0, 1e-6) << i;
    EXPECT_NEAR(state[i], inside ? 1 - kB1 : 0.0, 1e-7) << i;
    EXPECT_NEAR(state[length + i], inside ? 1 - kB2 : 0.0, 1e-9) << i;
  }
}

}  // namespace
}  // namespace pstrain::optim
