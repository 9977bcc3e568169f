// Dropout: the mask's rate and scale, the same mask for the same seed and rows
// however the rows are chunked, a new mask for a new seed, and the backward
// letting through (scaled) exactly the gradients of the elements kept.
#include "model/nn/dropout.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::RandomVector;

TEST(Dropout, DropsAboutTheRateAndScalesWhatItKeeps) {
  const int rows = 400, cols = 50;
  const float rate = 0.3f;
  std::vector<float> y(rows * cols, 2.0f);
  DropoutForward(MatrixView(y.data(), rows, cols), rate, 7, 0);
  int dropped = 0;
  for (float v : y) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(v, 2.0f / (1.0f - rate));
    }
  }
  // 20 000 draws: the fraction is within 5 standard deviations of the rate.
  const double fraction = static_cast<double>(dropped) / y.size();
  EXPECT_NEAR(fraction, rate, 5 * std::sqrt(rate * (1 - rate) / y.size()));
}

TEST(Dropout, TheMaskDependsOnSeedAndRowsNotOnHowTheRowsAreChunked) {
  const int rows = 10, cols = 7, stride = 9;
  std::vector<float> whole(rows * stride, 1.0f), chunked = whole, reseeded = whole;
  DropoutForward(MatrixView(whole.data(), rows, cols, stride), 0.5f, 99, 0);
  MatrixView c(chunked.data(), rows, cols, stride);
  DropoutForward(c.Rows(0, 4), 0.5f, 99, 0);
  DropoutForward(c.Rows(4, 6), 0.5f, 99, 4);
  DropoutForward(MatrixView(reseeded.data(), rows, cols, stride), 0.5f, 100, 0);
  EXPECT_EQ(whole, chunked);
  EXPECT_NE(whole, reseeded);
  for (int r = 0; r < rows; ++r) {
    for (int k = cols; k < stride; ++k) EXPECT_EQ(whole[r * stride + k], 1.0f) << "outside the view";
  }
}

TEST(Dropout, RateZeroKeepsEverything) {
  std::mt19937 rng(1);
  auto y = RandomVector(60, rng);
  auto before = y;
  DropoutForward(MatrixView(y.data(), 6, 10), 0.0f, 5, 0);
  EXPECT_EQ(y, before);
}

TEST(Dropout, BackwardPassesTheKeptGradientsScaledAndZeroesTheDropped) {
  const int rows = 8, cols = 6;
  const float rate = 0.25f;
  std::mt19937 rng(2);
  // A ReLU'd input: non-negative, some zeros.
  auto x = RandomVector(rows * cols, rng, -0.5f, 1.0f);
  for (float& v : x) v = v > 0 ? v : 0;
  auto y = x;
  DropoutForward(MatrixView(y.data(), rows, cols), rate, 3, 0);
  auto g = RandomVector(rows * cols, rng);
  auto dy = g;
  DropoutBackward(ConstMatrixView(y.data(), rows, cols), MatrixView(dy.data(), rows, cols), rate);
  // d(sum g * y)/dx for x > 0 is g * keep / (1 - rate); x = 0 sits behind the ReLU.
  for (int i = 0; i < rows * cols; ++i) {
    const bool kept = DropoutKeep(3, i, rate);
    const float want = x[i] > 0 && kept ? g[i] / (1 - rate) : 0.0f;
    EXPECT_FLOAT_EQ(dy[i], want) << i;
  }
}

}  // namespace
}  // namespace pstrain::worker::nn
