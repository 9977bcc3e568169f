// SGD against hand-computed steps of its formula (see common/optim/sgd.cc).
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

std::unique_ptr<Optimizer> MakeSgd(float lr, float momentum, bool nesterov, float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.lr = lr;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  auto opt = Optimizer::Create(c);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

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

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

TEST(Sgd, ScalesGradientThenStepsAgainstIt) {
  auto opt = MakeSgd(0.1f, 0.0f, false, 0.0f);
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, state;
  // g' = 0.5 * g = {2, 1, -0.5}; w -= 0.1 * g'.
  Step(*opt, w, state, {4.0f, 2.0f, -1.0f}, 0.5f);
  ExpectNear(w, {0.8, -2.1, 0.55});
}

TEST(Sgd, WeightDecayAddsL2TermToGradient) {
  auto opt = MakeSgd(0.1f, 0.0f, false, 0.1f);
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, state;
  // g' = {2 + 0.1, 1 - 0.2, -0.5 + 0.05} = {2.1, 0.8, -0.45}.
  Step(*opt, w, state, {4.0f, 2.0f, -1.0f}, 0.5f);
  ExpectNear(w, {0.79, -2.08, 0.545});
}

TEST(Sgd, MomentumAccumulatesVelocity) {
  auto opt = MakeSgd(0.1f, 0.9f, false, 0.0f);
  std::vector<float> w = {1.0f}, v = {0.0f};
  Step(*opt, w, v, {1.0f}, 1.0f);  // v = 1, w = 1 - 0.1
  ExpectNear(w, {0.9});
  Step(*opt, w, v, {1.0f}, 1.0f);  // v = 0.9 + 1 = 1.9, w = 0.9 - 0.19
  ExpectNear(w, {0.71});
  ExpectNear(v, {1.9});
}

TEST(Sgd, NesterovStepsWithLookAheadVelocity) {
  auto opt = MakeSgd(0.1f, 0.9f, true, 0.0f);
  std::vector<float> w = {1.0f}, v = {0.0f};
  Step(*opt, w, v, {1.0f}, 1.0f);  // v = 1, w = 1 - 0.1 * (1 + 0.9)
  ExpectNear(w, {0.81});
  Step(*opt, w, v, {1.0f}, 1.0f);  // v = 1.9, w = 0.81 - 0.1 * (1 + 1.71)
  ExpectNear(w, {0.539});
}

TEST(Sgd, LongRunsMatchScalarReferenceIncludingTail) {
  // 19 elements: two full 8-wide blocks and a tail of 3.
  const double lr = 0.05, mu = 0.8, wd = 0.01, scale = 0.25;
  auto opt = MakeSgd(lr, mu, true, wd);
  std::vector<float> w(19), v(19, 0.0f), g(19);
  std::vector<double> rw(19), rv(19, 0.0);
  for (int i = 0; i < 19; ++i) {
    w[i] = static_cast<float>(0.1 * (i - 9));
    rw[i] = w[i];
  }
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 19; ++i) g[i] = static_cast<float>((i % 5) - 2 + 0.5 * step);
    Step(*opt, w, v, g, static_cast<float>(scale));
    for (int i = 0; i < 19; ++i) {
      double gw = scale * g[i] + wd * rw[i];
      rv[i] = mu * rv[i] + gw;
      rw[i] -= lr * (gw + mu * rv[i]);
    }
  }
  ExpectNear(w, rw);
}

TEST(Sgd, OutOfPlaceWritesOutputAndLeavesInputAlone) {
  auto opt = MakeSgd(0.1f, 0.0f, false, 0.0f);
  std::vector<float> in = {1.0f, 2.0f}, out(2, 0.0f), g = {1.0f, -1.0f};
  UpdateArgs a;
  a.weights_in = in.data();
  a.weights_out = out.data();
  a.grads = g.data();
  a.n = 2;
  opt->Apply(a);
  EXPECT_EQ(in, (std::vector<float>{1.0f, 2.0f}));
  ExpectNear(out, {0.9, 2.1});
}

}  // namespace
}  // namespace pstrain::optim
