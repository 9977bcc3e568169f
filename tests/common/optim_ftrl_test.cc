// FTRL-Proximal against McMahan et al. 2013, Algorithm 1
// (see common/optim/ftrl.cc), in double.
#include <cmath>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

std::unique_ptr<Optimizer> MakeFtrl(float alpha, float beta, float l1, float l2) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kFtrl;
  c.lr = alpha;
  c.ftrl_beta = beta;
  c.ftrl_l1 = l1;
  c.ftrl_l2 = l2;
  auto opt = Optimizer::Create(c);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

// state = [z (n)][n (n)].
void Step(const Optimizer& opt, std::vector<float>& w, std::vector<float>& state,
          const std::vector<float>& g, float scale) {
  UpdateArgs a;
  a.weights_in = w.data();
  a.weights_out = w.data();
  a.state = state.data();
  a.state_stride = w.size();
  a.grads = g.data();
  a.n = w.size();
  a.scale = scale;
  opt.Apply(a);
}

struct Reference {
  double alpha, beta, l1, l2;
  std::vector<double> w, z, n;
  void Step(const std::vector<float>& g, double scale) {
    for (size_t i = 0; i < w.size(); ++i) {
      double gs = scale * g[i];
      double sigma = (std::sqrt(n[i] + gs * gs) - std::sqrt(n[i])) / alpha;
      z[i] += gs - sigma * w[i];
      n[i] += gs * gs;
      w[i] = std::abs(z[i]) <= l1
                 ? 0.0
                 : -(z[i] - std::copysign(l1, z[i])) / ((beta + std::sqrt(n[i])) / alpha + l2);
    }
  }
};

TEST(Ftrl, FirstStepFromZero) {
  auto opt = MakeFtrl(0.1f, 1.0f, 0.5f, 0.1f);
  std::vector<float> w(2, 0.0f), state(4, 0.0f);
  // Element 0: sigma = 20, z = 2, n = 4, w = -(2 - 0.5) / ((1 + 2) / 0.1 + 0.1).
  // Element 1: z = -2 mirrors it.
  Step(*opt, w, state, {2.0f, -2.0f}, 1.0f);
  EXPECT_NEAR(w[0], -0.0498338870, 1e-7);
  EXPECT_NEAR(w[1], 0.0498338870, 1e-7);
  EXPECT_EQ(state, (std::vector<float>{2.0f, -2.0f, 4.0f, 4.0f}));
  // Second step: sigma = (sqrt(8) - 2) / 0.1, z = 4 - sigma * w.
  Step(*opt, w, state, {2.0f, -2.0f}, 1.0f);
  EXPECT_NEAR(state[0], 4.4128374376, 1e-5);
  EXPECT_NEAR(w[0], -0.1019385626, 1e-6);
}

TEST(Ftrl, WeightIsExactlyZeroWhileAbsZIsAtMostL1) {
  auto opt = MakeFtrl(0.1f, 1.0f, 0.5f, 0.1f);
  // A small gradient leaves |z| <= l1, even from a non-zero weight.
  std::vector<float> w = {0.01f, 0.0f, 0.0f}, state(6, 0.0f);
  Step(*opt, w, state, {0.3f, -0.5f, 0.6f}, 1.0f);
  EXPECT_EQ(w[0], 0.0f);  // z = 0.3 - (0.3 / 0.1) * 0.01 = 0.27
  EXPECT_EQ(w[1], 0.0f);  // z = -0.5, exactly l1
  EXPECT_NE(w[2], 0.0f);  // z = 0.6
  EXPECT_FALSE(std::signbit(w[0]));
}

TEST(Ftrl, LongRunsMatchReferenceFromRandomStart) {
  const int n = 19;
  const double alpha = 0.05, beta = 1.0, l1 = 0.02, l2 = 0.5, scale = 0.5;
  auto opt = MakeFtrl(alpha, beta, l1, l2);
  std::vector<float> w(n), state(2 * n, 0.0f), g(n);
  Reference ref{alpha, beta, l1, l2, std::vector<double>(n), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
  for (int i = 0; i < n; ++i) ref.w[i] = w[i] = static_cast<float>(0.01 * (i - 9));
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(1.3 * i + step) * 0.2);
    Step(*opt, w, state, g, static_cast<float>(scale));
    ref.Step(g, scale);
  }
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(w[i], ref.w[i], 1e-6) << i;
    if (ref.w[i] == 0.0) {
      EXPECT_EQ(w[i], 0.0f) << i;
    }
  }
}

}  // namespace
}  // namespace pstrain::optim
