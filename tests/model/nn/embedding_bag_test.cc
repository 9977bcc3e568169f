#include "model/nn/embedding_bag.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::ExpectGradientMatches;
using testing::RandomVector;

// Bags: sample 0 = {2}, sample 1 = {0, 3, 0} (a repeated row), sample 2 = {},
// sample 3 = {1, 4}.
struct Fixture {
  int unique = 5, dim = 3;
  std::vector<uint32_t> index = {2, 0, 3, 0, 1, 4};
  std::vector<uint32_t> offsets = {0, 1, 4, 4, 6};
  Bags bags() const { return Bags{index.data(), offsets.data(), 4}; }
};

TEST(EmbeddingBag, SumAndMeanPoolTheBagRows) {
  Fixture fx;
  std::mt19937 rng(1);
  auto rows = RandomVector(fx.unique * fx.dim, rng);
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    std::vector<float> out(4 * fx.dim, 42.0f);
    EmbeddingBagForward(rows.data(), fx.bags(), pooling, false, MatrixView(out.data(), 4, fx.dim));
    const float mean = pooling == Pooling::kMean ? 1.0f : 0.0f;
    for (int k = 0; k < fx.dim; ++k) {
      EXPECT_FLOAT_EQ(out[0 * fx.dim + k], rows[2 * fx.dim + k]);
      const float s1 = 2 * rows[0 * fx.dim + k] + rows[3 * fx.dim + k];
      EXPECT_NEAR(out[1 * fx.dim + k], mean ? s1 / 3 : s1, 1e-6);
      EXPECT_EQ(out[2 * fx.dim + k], 0.0f) << "an empty bag pools to zero";
      const float s3 = rows[1 * fx.dim + k] + rows[4 * fx.dim + k];
      EXPECT_NEAR(out[3 * fx.dim + k], mean ? s3 / 2 : s3, 1e-6);
    }
  }
}

TEST(EmbeddingBag, AccumulateAddsToTheOutput) {
  Fixture fx;
  std::vector<float> rows(fx.unique * fx.dim, 1.0f), out(4 * fx.dim, 10.0f);
  // Writes into a strided column block of a wider matrix.
  std::vector<float> wide(4 * 5, 10.0f);
  EmbeddingBagForward(rows.data(), fx.bags(), Pooling::kSum, true,
                      MatrixView(wide.data() + 1, 4, fx.dim, 5));
  EXPECT_EQ(wide[0], 10.0f);
  EXPECT_EQ(wide[1], 11.0f);
  EXPECT_EQ(wide[5 + 1], 13.0f);
  EXPECT_EQ(wide[10 + 1], 10.0f);
  EXPECT_EQ(wide[4], 10.0f);
}

TEST(EmbeddingBag, GradientsMatchFiniteDifferences) {
  Fixture fx;
  std::mt19937 rng(2);
  auto rows = RandomVector(fx.unique * fx.dim, rng), r = RandomVector(4 * fx.dim, rng);
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    std::vector<float> out(4 * fx.dim);
    auto loss = [&] {
      EmbeddingBagForward(rows.data(), fx.bags(), pooling, false,
                          MatrixView(out.data(), 4, fx.dim));
      double s = 0;
      for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * r[i];
      return s;
    };
    std::vector<float> d_rows(rows.size(), 0.0f);
    EmbeddingBagBackward(ConstMatrixView(r.data(), 4, fx.dim), fx.bags(), pooling, d_rows.data());
    ExpectGradientMatches(loss, rows.data(), d_rows, rows.size(),
                          pooling == Pooling::kSum ? "sum" : "mean");
  }
}

TEST(EmbeddingBag, BackwardAddsToExistingGradient) {
  Fixture fx;
  std::vector<float> g(4 * fx.dim, 1.0f), d_rows(fx.unique * fx.dim, 100.0f);
  EmbeddingBagBackward(ConstMatrixView(g.data(), 4, fx.dim), fx.bags(), Pooling::kSum,
                       d_rows.data());
  EXPECT_EQ(d_rows[0], 102.0f);  // row 0 appears twice in bag 1
  EXPECT_EQ(d_rows[2 * fx.dim], 101.0f);
}

}  // namespace
}  // namespace pstrain::worker::nn
