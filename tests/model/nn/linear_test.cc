#include "model/nn/linear.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/tensor.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::ExpectGradientMatches;
using testing::RandomVector;

// Pre-activation x W^T + b computed in double.
std::vector<double> NaiveAffine(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& b, int batch, int in, int out) {
  std::vector<double> z(static_cast<size_t>(batch) * out);
  for (int r = 0; r < batch; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[o * in + i];
      z[r * out + o] = s;
    }
  }
  return z;
}

struct LinearCase {
  int batch, in, out;
  Activation act;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, ForwardMatchesNaiveOnStridedViews) {
  const LinearCase c = GetParam();
  std::mt19937 rng(7);
  auto x = RandomVector(c.batch * c.in, rng), w = RandomVector(c.out * c.in, rng),
       b = RandomVector(c.out, rng);
  // Input and output live inside wider matrices (as column blocks do in models).
  const int x_stride = c.in + 3, y_stride = c.out + 5;
  std::vector<float> xs(c.batch * x_stride, 9.0f), ys(c.batch * y_stride, -7.0f);
  for (int r = 0; r < c.batch; ++r) std::copy_n(&x[r * c.in], c.in, &xs[r * x_stride + 2]);
  LinearForward(ConstMatrixView(xs.data() + 2, c.batch, c.in, x_stride), w.data(), b.data(),
                c.act, MatrixView(ys.data() + 1, c.batch, c.out, y_stride));
  auto z = NaiveAffine(x, w, b, c.batch, c.in, c.out);
  for (int r = 0; r < c.batch; ++r) {
    EXPECT_EQ(ys[r * y_stride], -7.0f) << "wrote outside the view";
    for (int o = 0; o < c.out; ++o) {
      double want = z[r * c.out + o];
      if (c.act == Activation::kRelu) want = std::max(want, 0.0);
      EXPECT_NEAR(ys[r * y_stride + 1 + o], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST_P(LinearTest, GradientsMatchFiniteDifferences) {
  const LinearCase c = GetParam();
  std::mt19937 rng(11);
  std::vector<float> x, w, b, r;
  // Redraw until no pre-activation is near the ReLU kink: a perturbation of
  // eps = 1e-2 moves them by at most 1e-2 here.
  for (int attempt = 0; attempt < 200; ++attempt) {
    x = RandomVector(c.batch * c.in, rng);
    w = RandomVector(c.out * c.in, rng);
    b = RandomVector(c.out, rng);
    r = RandomVector(c.batch * c.out, rng);
    if (c.act == Activation::kNone) break;
    double closest = 1e9;
    for (double v : NaiveAffine(x, w, b, c.batch, c.in, c.out)) closest = std::min(closest, std::abs(v));
    if (closest > 0.02) break;
  }
  std::vector<float> y(c.batch * c.out);
  auto loss = [&] {
    LinearForward(ConstMatrixView(x.data(), c.batch, c.in), w.data(), b.data(), c.act,
                  MatrixView(y.data(), c.batch, c.out));
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  };
  loss();
  std::vector<float> dy = r, dw(w.size()), db(b.size()), dx(x.size());
  LinearBackward(ConstMatrixView(x.data(), c.batch, c.in), w.data(),
                 ConstMatrixView(y.data(), c.batch, c.out), c.act,
                 MatrixView(dy.data(), c.batch, c.out), dw.data(), db.data(),
                 MatrixView(dx.data(), c.batch, c.in));
  ExpectGradientMatches(loss, w.data(), dw, w.size(), "dW");
  ExpectGradientMatches(loss, b.data(), db, b.size(), "db");
  ExpectGradientMatches(loss, x.data(), dx, x.size(), "dx");
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(LinearCase{5, 4, 3, Activation::kNone},
                                           LinearCase{5, 4, 3, Activation::kRelu},
                                           LinearCase{9, 7, 1, Activation::kNone},
                                           LinearCase{3, 6, 1, Activation::kRelu},
                                           LinearCase{17, 13, 8, Activation::kRelu}));

TEST(Linear, BackwardWithoutInputGradientLeavesNoTrace) {
  std::mt19937 rng(3);
  const int batch = 4, in = 3, out = 2;
  auto x = RandomVector(batch * in, rng), w = RandomVector(out * in, rng);
  std::vector<float> y(batch * out), dy = RandomVector(batch * out, rng), dw(out * in, NAN),
                                     db(out, NAN);
  LinearForward(ConstMatrixView(x.data(), batch, in), w.data(), nullptr, Activation::kNone,
                MatrixView(y.data(), batch, out));
  LinearBackward(ConstMatrixView(x.data(), batch, in), w.data(),
                 ConstMatrixView(y.data(), batch, out), Activation::kNone,
                 MatrixView(dy.data(), batch, out), dw.data(), db.data(), MatrixView());
  for (float v : dw) EXPECT_TRUE(std::isfinite(v));
  for (float v : db) EXPECT_TRUE(std::isfinite(v));
}

TEST(Linear, NoInputFeaturesGivesTheBias) {
  const int batch = 3;
  std::vector<float> b = {0.5f}, y(batch, NAN), dy = {1.0f, 2.0f, 3.0f}, db(1);
  LinearForward(ConstMatrixView(nullptr, batch, 0), nullptr, b.data(), Activation::kNone,
                MatrixView(y.data(), batch, 1));
  for (float v : y) EXPECT_EQ(v, 0.5f);
  LinearBackward(ConstMatrixView(nullptr, batch, 0), nullptr, ConstMatrixView(y.data(), batch, 1),
                 Activation::kNone, MatrixView(dy.data(), batch, 1), nullptr, db.data(),
                 MatrixView());
  EXPECT_EQ(db[0], 6.0f);
}

TEST(Relu, ForwardClampsAndBackwardMasks) {
  std::vector<float> x = {-1.0f, 0.0f, 2.0f, -0.5f, 3.0f, 0.25f}, y(6), dx(6);
  std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  ReluForward(ConstMatrixView(x.data(), 2, 3), MatrixView(y.data(), 2, 3));
  EXPECT_EQ(y, (std::vector<float>{0, 0, 2, 0, 3, 0.25f}));
  ReluBackward(ConstMatrixView(y.data(), 2, 3), ConstMatrixView(dy.data(), 2, 3),
               MatrixView(dx.data(), 2, 3));
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 3, 0, 5, 6}));
}

TEST(Relu, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  auto x = RandomVector(24, rng), r = RandomVector(24, rng);
  for (float& v : x) {
    if (std::abs(v) < 0.05f) v = 0.5f;
  }
  std::vector<float> y(24);
  auto loss = [&] {
    ReluForward(ConstMatrixView(x.data(), 4, 6), MatrixView(y.data(), 4, 6));
    double s = 0;
    for (int i = 0; i < 24; ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  };
  loss();
  std::vector<float> dx(24);
  ReluBackward(ConstMatrixView(y.data(), 4, 6), ConstMatrixView(r.data(), 4, 6),
               MatrixView(dx.data(), 4, 6));
  ExpectGradientMatches(loss, x.data(), dx, x.size(), "dx");
}

TEST(BiasActivation, BackwardSumsMaskedColumns) {
  std::vector<float> y = {1, 0, 2, 3, 0, 4}, dy = {1, 1, 1, 2, 2, 2}, db(3);
  BiasActivationBackward(ConstMatrixView(y.data(), 2, 3), Activation::kRelu,
                         MatrixView(dy.data(), 2, 3), db.data());
  EXPECT_EQ(dy, (std::vector<float>{1, 0, 1, 2, 0, 2}));
  EXPECT_EQ(db, (std::vector<float>{3, 0, 3}));
}

}  // namespace
}  // namespace pstrain::worker::nn
