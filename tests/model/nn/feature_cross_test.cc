// The feature-crossing layers: forward against naive double-precision sums on
// strided views, backward against central differences.
#include "model/nn/feature_cross.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::ExpectGradientMatches;
using testing::RandomVector;

// sum_{i<j} <t_i, t_j> of one row, pair by pair.
double NaiveFm(const float* row, int n, int dim) {
  double s = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      for (int k = 0; k < dim; ++k) s += static_cast<double>(row[i * dim + k]) * row[j * dim + k];
    }
  }
  return s;
}

TEST(Fm, ForwardEqualsThePairwiseSumOnStridedViewsAndAccumulates) {
  const int batch = 7, n = 5, dim = 3, stride = n * dim + 2;
  std::mt19937 rng(11);
  auto t = RandomVector(static_cast<size_t>(batch) * stride, rng);
  std::vector<float> out(batch * 2, 9.0f);
  FmForward(ConstMatrixView(t.data() + 1, batch, n * dim, stride), n, dim, false,
            MatrixView(out.data(), batch, 1, 2));
  for (int b = 0; b < batch; ++b) {
    EXPECT_NEAR(out[b * 2], NaiveFm(&t[b * stride + 1], n, dim), 1e-5) << b;
    EXPECT_EQ(out[b * 2 + 1], 9.0f) << "wrote outside the view";
  }
  FmForward(ConstMatrixView(t.data() + 1, batch, n * dim, stride), n, dim, true,
            MatrixView(out.data(), batch, 1, 2));
  for (int b = 0; b < batch; ++b) {
    EXPECT_NEAR(out[b * 2], 2 * NaiveFm(&t[b * stride + 1], n, dim), 2e-5) << b;
  }
}

TEST(Fm, BackwardMatchesFiniteDifferences) {
  const int batch = 4, n = 4, dim = 3, width = n * dim;
  std::mt19937 rng(12);
  auto t = RandomVector(static_cast<size_t>(batch) * width, rng);
  auto w = RandomVector(batch, rng);  // loss = sum_b w_b fm_b
  std::vector<float> out(batch), dt(t.size(), 5.0f);
  FmBackward(ConstMatrixView(t.data(), batch, width), ConstMatrixView(w.data(), batch, 1), n, dim,
             false, MatrixView(dt.data(), batch, width));
  auto loss = [&] {
    FmForward(ConstMatrixView(t.data(), batch, width), n, dim, false,
              MatrixView(out.data(), batch, 1));
    double s = 0;
    for (int b = 0; b < batch; ++b) s += static_cast<double>(w[b]) * out[b];
    return s;
  };
  ExpectGradientMatches(loss, t.data(), dt, t.size(), "fm dt");
  // accumulate adds the same gradient again
  std::vector<float> twice = dt;
  FmBackward(ConstMatrixView(t.data(), batch, width), ConstMatrixView(w.data(), batch, 1), n, dim,
             true, MatrixView(twice.data(), batch, width));
  for (size_t i = 0; i < dt.size(); ++i) ASSERT_NEAR(twice[i], 2 * dt[i], 1e-5) << i;
}

TEST(CrossCombine, ForwardAndBackwardMatchTheirDefinitionAndFiniteDifferences) {
  const int rows = 5, cols = 6, stride = cols + 1;
  std::mt19937 rng(13);
  auto x0 = RandomVector(static_cast<size_t>(rows) * stride, rng);
  auto u = RandomVector(static_cast<size_t>(rows) * cols, rng);
  auto xl = RandomVector(static_cast<size_t>(rows) * cols, rng);
  auto w = RandomVector(static_cast<size_t>(rows) * cols, rng);  // loss = <w, out>
  std::vector<float> out(static_cast<size_t>(rows) * cols);
  auto forward = [&] {
    CrossCombineForward(ConstMatrixView(x0.data(), rows, cols, stride),
                        ConstMatrixView(u.data(), rows, cols), ConstMatrixView(xl.data(), rows, cols),
                        MatrixView(out.data(), rows, cols));
  };
  forward();
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      ASSERT_FLOAT_EQ(out[r * cols + c], x0[r * stride + c] * u[r * cols + c] + xl[r * cols + c]);
    }
  }
  auto loss = [&] {
    forward();
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(w[i]) * out[i];
    return s;
  };
  std::vector<float> du(u.size()), dx0(static_cast<size_t>(rows) * cols, 3.0f);
  CrossCombineBackward(ConstMatrixView(w.data(), rows, cols),
                       ConstMatrixView(x0.data(), rows, cols, stride),
                       ConstMatrixView(u.data(), rows, cols), MatrixView(du.data(), rows, cols),
                       MatrixView(dx0.data(), rows, cols), false);
  ExpectGradientMatches(loss, u.data(), du, u.size(), "cross du");
  // dx0 is packed, x0 strided: compare row by row through a packed copy's gradient.
  std::vector<float> dx0_strided(x0.size(), 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) dx0_strided[r * stride + c] = dx0[r * cols + c];
  }
  ExpectGradientMatches(loss, x0.data(), dx0_strided, x0.size(), "cross dx0");
  std::vector<float> acc = dx0;
  CrossCombineBackward(ConstMatrixView(w.data(), rows, cols),
                       ConstMatrixView(x0.data(), rows, cols, stride),
                       ConstMatrixView(u.data(), rows, cols), MatrixView(du.data(), rows, cols),
                       MatrixView(acc.data(), rows, cols), true);
  for (size_t i = 0; i < acc.size(); ++i) ASSERT_NEAR(acc[i], 2 * dx0[i], 1e-6) << i;
}

TEST(AddMatrix, AddsIntoAStridedView) {
  std::vector<float> src = {1, 2, 3, 4}, dst = {10, 20, 99, 30, 40, 99};
  AddMatrix(ConstMatrixView(src.data(), 2, 2), MatrixView(dst.data(), 2, 2, 3));
  EXPECT_EQ(dst, (std::vector<float>{11, 22, 99, 33, 44, 99}));
}

}  // namespace
}  // namespace pstrain::worker::nn
