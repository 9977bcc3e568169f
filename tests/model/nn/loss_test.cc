#include "model/nn/loss.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

TEST(SigmoidBceLoss, MatchesTheTextbookFormulaForModerateLogits) {
  std::vector<float> z = {-3.0f, -0.5f, 0.0f, 0.7f, 4.0f}, y = {0, 1, 1, 0, 1}, dz(5);
  const double loss = SigmoidBceLoss(z.data(), y.data(), 5, dz.data());
  double want = 0;
  for (int i = 0; i < 5; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(z[i])));
    want += -(y[i] * std::log(p) + (1 - y[i]) * std::log(1 - p));
    EXPECT_NEAR(dz[i], p - y[i], 1e-6);
  }
  EXPECT_NEAR(loss, want, 1e-9);
}

TEST(SigmoidBceLoss, StaysFiniteForExtremeLogits) {
  std::vector<float> z = {-1000.0f, 1000.0f, -90.0f, 90.0f}, y = {1, 0, 0, 1}, dz(4);
  const double loss = SigmoidBceLoss(z.data(), y.data(), 4, dz.data());
  EXPECT_NEAR(loss, 2000.0, 1e-6);  // the two confident mistakes; the rest ~0
  EXPECT_EQ(dz[0], -1.0f);
  EXPECT_EQ(dz[1], 1.0f);
  EXPECT_NEAR(dz[2], 0.0f, 1e-30);
  EXPECT_NEAR(dz[3], 0.0f, 1e-30);
}

TEST(SigmoidBceLoss, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(13);
  auto z = testing::RandomVector(16, rng, -4.0f, 4.0f);
  std::vector<float> y(16), dz(16), scratch(16);
  for (int i = 0; i < 16; ++i) y[i] = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? 0.0f : 0.3f);
  SigmoidBceLoss(z.data(), y.data(), 16, dz.data());
  auto loss = [&] { return SigmoidBceLoss(z.data(), y.data(), 16, scratch.data()); };
  testing::ExpectGradientMatches(loss, z.data(), dz, z.size(), "dlogits");
}

TEST(Sigmoid, IsStableAndSymmetric) {
  std::vector<float> z = {-200.0f, -1.0f, 0.0f, 1.0f, 200.0f}, p(5);
  Sigmoid(z.data(), 5, p.data());
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[2], 0.5f);
  EXPECT_EQ(p[4], 1.0f);
  EXPECT_NEAR(p[1] + p[3], 1.0f, 1e-7);
}

}  // namespace
}  // namespace pstrain::worker::nn
