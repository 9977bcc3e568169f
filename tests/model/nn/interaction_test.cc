#include "model/nn/interaction.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::ExpectGradientMatches;
using testing::RandomVector;

// z = [t_0 | <t_i, t_j> for i = 1..n-1, j < i] per row, in double.
std::vector<double> NaiveInteraction(const std::vector<float>& t, int batch, int n, int dim) {
  const int width = InteractionOutputWidth(n, dim);
  std::vector<double> z(static_cast<size_t>(batch) * width);
  for (int b = 0; b < batch; ++b) {
    const float* row = &t[static_cast<size_t>(b) * n * dim];
    double* out = &z[static_cast<size_t>(b) * width];
    for (int k = 0; k < dim; ++k) out[k] = row[k];
    int p = dim;
    for (int i = 1; i < n; ++i) {
      for (int j = 0; j < i; ++j) {
        double s = 0;
        for (int k = 0; k < dim; ++k) s += static_cast<double>(row[i * dim + k]) * row[j * dim + k];
        out[p++] = s;
      }
    }
  }
  return z;
}

struct Shape {
  int batch, n, dim;
};

class DotInteractionTest : public ::testing::TestWithParam<Shape> {};

TEST_P(DotInteractionTest, ForwardMatchesNaiveOnStridedViews) {
  const Shape s = GetParam();
  std::mt19937 rng(17);
  const int in_width = s.n * s.dim, width = InteractionOutputWidth(s.n, s.dim);
  auto t = RandomVector(static_cast<size_t>(s.batch) * in_width, rng);
  // Input and output inside wider matrices, offset by one column.
  const int t_stride = in_width + 3, z_stride = width + 2;
  std::vector<float> ts(static_cast<size_t>(s.batch) * t_stride, 5.0f),
      zs(static_cast<size_t>(s.batch) * z_stride, -3.0f);
  for (int b = 0; b < s.batch; ++b) {
    std::copy_n(&t[static_cast<size_t>(b) * in_width], in_width, &ts[b * t_stride + 1]);
  }
  DotInteractionForward(ConstMatrixView(ts.data() + 1, s.batch, in_width, t_stride), s.n, s.dim,
                        MatrixView(zs.data() + 1, s.batch, width, z_stride));
  auto want = NaiveInteraction(t, s.batch, s.n, s.dim);
  for (int b = 0; b < s.batch; ++b) {
    EXPECT_EQ(zs[b * z_stride], -3.0f) << "wrote outside the view";
    EXPECT_EQ(zs[b * z_stride + width + 1], -3.0f) << "wrote outside the view";
    for (int c = 0; c < width; ++c) {
      ASSERT_NEAR(zs[b * z_stride + 1 + c], want[b * width + c], 1e-5) << "row " << b << " col " << c;
    }
  }
}

TEST_P(DotInteractionTest, GradientMatchesFiniteDifferences) {
  const Shape s = GetParam();
  std::mt19937 rng(19);
  const int in_width = s.n * s.dim, width = InteractionOutputWidth(s.n, s.dim);
  auto t = RandomVector(static_cast<size_t>(s.batch) * in_width, rng);
  auto r = RandomVector(static_cast<size_t>(s.batch) * width, rng);
  std::vector<float> z(r.size());
  auto loss = [&] {
    DotInteractionForward(ConstMatrixView(t.data(), s.batch, in_width), s.n, s.dim,
                          MatrixView(z.data(), s.batch, width));
    double sum = 0;
    for (size_t i = 0; i < z.size(); ++i) sum += static_cast<double>(z[i]) * r[i];
    return sum;
  };
  std::vector<float> dt(t.size(), 123.0f);  // overwritten
  DotInteractionBackward(ConstMatrixView(t.data(), s.batch, in_width),
                         ConstMatrixView(r.data(), s.batch, width), s.n, s.dim,
                         MatrixView(dt.data(), s.batch, in_width));
  ExpectGradientMatches(loss, t.data(), dt, t.size(), "dt");
}

INSTANTIATE_TEST_SUITE_P(Shapes, DotInteractionTest,
                         ::testing::Values(Shape{1, 2, 1}, Shape{3, 4, 3}, Shape{8, 5, 8},
                                           Shape{11, 6, 16}, Shape{9, 27, 16},
                                           Shape{16, 10, 12}, Shape{5, 3, 20}));

TEST(DotInteraction, NaturalDlrmShapeHasThePaperWidth) {
  EXPECT_EQ(InteractionPairs(27), 351);
  EXPECT_EQ(InteractionOutputWidth(27, 16), 367);
}

}  // namespace
}  // namespace pstrain::worker::nn
