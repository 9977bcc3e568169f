// Adagrad and row-wise Adagrad against their formulas
// (see common/optim/adagrad.cc), expected values computed in double.
#include <cmath>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

std::unique_ptr<Optimizer> Make(OptimizerKind kind, float lr, float eps, float init_acc,
                                float wd) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  c.eps = eps;
  c.initial_accumulator = init_acc;
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

TEST(Adagrad, AccumulatesSquaredScaledGradient) {
  auto opt = Make(OptimizerKind::kAdagrad, 0.1f, 0.0f, 0.1f, 0.0f);
  std::vector<float> w = {1.0f, -2.0f}, acc(2);
  opt->InitState(acc.data(), 2, 2);
  // g' = 0.5 * {2, -1} = {1, -0.5}; acc = 0.1 + g'^2 = {1.1, 0.35}.
  Step(*opt, w, acc, {2.0f, -1.0f}, 0.5f);
  ExpectNear(acc, {1.1, 0.35});
  ExpectNear(w, {1.0 - 0.1 * 1.0 / std::sqrt(1.1), -2.0 + 0.1 * 0.5 / std::sqrt(0.35)});
  EXPECT_NEAR(w[0], 0.9046537411, 1e-6);
  EXPECT_NEAR(w[1], -1.9154845745, 1e-6);
}

TEST(Adagrad, WeightDecayEntersAccumulatorAndStep) {
  auto opt = Make(OptimizerKind::kAdagrad, 0.1f, 1e-8f, 0.0f, 0.5f);
  std::vector<float> w = {2.0f}, acc = {0.0f};
  // g' = 1 + 0.5 * 2 = 2; acc = 4; w = 2 - 0.1 * 2 / (2 + 1e-8).
  Step(*opt, w, acc, {1.0f}, 1.0f);
  ExpectNear(acc, {4.0});
  ExpectNear(w, {1.9000000005});
}

TEST(Adagrad, LongRunsMatchScalarReferenceIncludingTail) {
  const double lr = 0.05, eps = 1e-6, init = 0.01, wd = 0.001, scale = 0.5;
  auto opt = Make(OptimizerKind::kAdagrad, lr, eps, init, wd);
  const int n = 21;
  std::vector<float> w(n), acc(n), g(n);
  opt->InitState(acc.data(), n, n);
  std::vector<double> rw(n), racc(n, init);
  for (int i = 0; i < n; ++i) rw[i] = w[i] = static_cast<float>(0.03 * i - 0.3);
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(i + step));
    Step(*opt, w, acc, g, static_cast<float>(scale));
    for (int i = 0; i < n; ++i) {
      double gw = scale * g[i] + wd * rw[i];
      racc[i] += gw * gw;
      rw[i] -= lr * gw / (std::sqrt(racc[i]) + eps);
    }
  }
  ExpectNear(w, rw);
  ExpectNear(acc, racc);
}

TEST(RowwiseAdagrad, OneAccumulatorGrowsByMeanSquaredGradient) {
  auto opt = Make(OptimizerKind::kRowwiseAdagrad, 0.1f, 1e-8f, 0.0f, 0.0f);
  std::vector<float> w(4, 1.0f), acc = {0.0f};
  // acc = mean{1, 4, 9, 16} = 7.5; every element steps by 0.1 / sqrt(7.5).
  Step(*opt, w, acc, {1.0f, 2.0f, 3.0f, 4.0f}, 1.0f);
  ExpectNear(acc, {7.5});
  ExpectNear(w, {0.9634851630, 0.9269703259, 0.8904554889, 0.8539406519});
}

TEST(RowwiseAdagrad, LongRowsMatchScalarReference) {
  const double lr = 0.1, eps = 1e-8, init = 0.5, wd = 0.01, scale = 0.25;
  auto opt = Make(OptimizerKind::kRowwiseAdagrad, lr, eps, init, wd);
  const int n = 13;  // one full block and a tail of 5
  std::vector<float> w(n), acc(1), g(n);
  opt->InitState(acc.data(), n, n);
  EXPECT_EQ(acc[0], 0.5f);
  std::vector<double> rw(n);
  double racc = init;
  for (int i = 0; i < n; ++i) rw[i] = w[i] = static_cast<float>(0.1 * i);
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < n; ++i) g[i] = static_cast<float>(std::cos(i * 0.7 + step));
    Step(*opt, w, acc, g, static_cast<float>(scale));
    double sum = 0;
    std::vector<double> gw(n);
    for (int i = 0; i < n; ++i) {
      gw[i] = scale * g[i] + wd * rw[i];
      sum += gw[i] * gw[i];
    }
    racc += sum / n;
    for (int i = 0; i < n; ++i) rw[i] -= lr * gw[i] / (std::sqrt(racc) + eps);
  }
  ExpectNear(w, rw);
  EXPECT_NEAR(acc[0], racc, 1e-6);
}

}  // namespace
}  // namespace pstrain::optim
