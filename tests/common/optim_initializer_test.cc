// Deterministic initializers: values depend only on (seed, table, row,
// column) and follow the configured distribution.
#include <cmath>
#include <vector>

#include "common/optim/initializer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

Initializer Make(InitKind kind, float scale, uint64_t seed, uint32_t table) {
  InitializerConfig c;
  c.kind = kind;
  c.scale = scale;
  c.seed = seed;
  auto init = Initializer::Create(c, table);
  EXPECT_TRUE(init.ok()) << init.status();
  return *init;
}

TEST(Initializer, SameInputsGiveSameValuesInAnyInstance) {
  for (InitKind kind : {InitKind::kUniform, InitKind::kNormal}) {
    Initializer a = Make(kind, 0.1f, 7, 3);
    Initializer b = Make(kind, 0.1f, 7, 3);
    std::vector<float> row_a(17), row_b(17);
    a.FillRow(123456789, row_a.data(), 17);
    b.FillRow(123456789, row_b.data(), 17);
    EXPECT_EQ(row_a, row_b);
    for (uint32_t c = 0; c < 17; ++c) EXPECT_EQ(a.Value(123456789, c), row_a[c]) << c;
  }
}

TEST(Initializer, SeedTableAndRowEachChangeTheValues) {
  Initializer base = Make(InitKind::kUniform, 1.0f, 1, 1);
  EXPECT_NE(base.Value(5, 0), Make(InitKind::kUniform, 1.0f, 2, 1).Value(5, 0));
  EXPECT_NE(base.Value(5, 0), Make(InitKind::kUniform, 1.0f, 1, 2).Value(5, 0));
  EXPECT_NE(base.Value(5, 0), base.Value(6, 0));
  EXPECT_NE(base.Value(5, 0), base.Value(5, 1));
}

TEST(Initializer, DenseRangeDoesNotDependOnWhereTheShardStarts) {
  Initializer init = Make(InitKind::kNormal, 0.5f, 9, 4);
  std::vector<float> whole(100), tail(60);
  init.FillRange(0, whole.data(), 100);
  init.FillRange(40, tail.data(), 60);
  EXPECT_EQ(std::vector<float>(whole.begin() + 40, whole.end()), tail);
}

TEST(Initializer, UniformStaysInRangeWithUniformMoments) {
  Initializer init = Make(InitKind::kUniform, 0.2f, 3, 0);
  const int rows = 4000, dim = 16;
  double sum = 0, sum_sq = 0;
  std::vector<float> row(dim);
  for (int r = 0; r < rows; ++r) {
    init.FillRow(r, row.data(), dim);
    for (float v : row) {
      ASSERT_GE(v, -0.2f);
      ASSERT_LT(v, 0.2f);
      sum += v;
      sum_sq += double{v} * v;
    }
  }
  const double count = rows * dim;
  EXPECT_NEAR(sum / count, 0.0, 0.003);
  EXPECT_NEAR(sum_sq / count, 0.04 / 3, 0.0005);  // variance of U(-s, s) is s^2 / 3
}

TEST(Initializer, NormalHasZeroMeanAndScaleAsStandardDeviation) {
  Initializer init = Make(InitKind::kNormal, 0.5f, 11, 2);
  const int rows = 4000, dim = 15;  // odd dim: the last column uses half a pair
  double sum = 0, sum_sq = 0;
  std::vector<float> row(dim);
  for (int r = 0; r < rows; ++r) {
    init.FillRow(r * 7919ULL, row.data(), dim);
    for (float v : row) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sum_sq += double{v} * v;
    }
  }
  const double count = rows * dim;
  EXPECT_NEAR(sum / count, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sum_sq / count), 0.5, 0.01);
}

TEST(Initializer, ZerosAndConstantFillEveryElement) {
  std::vector<float> row(5, -1.0f);
  Make(InitKind::kZeros, 3.0f, 0, 0).FillRow(1, row.data(), 5);
  EXPECT_EQ(row, std::vector<float>(5, 0.0f));
  Make(InitKind::kConstant, 0.25f, 0, 0).FillRange(10, row.data(), 5);
  EXPECT_EQ(row, std::vector<float>(5, 0.25f));
}

TEST(Initializer, RejectsNegativeOrNonFiniteScaleAndUnknownKind) {
  InitializerConfig c;
  c.kind = InitKind::kNormal;
  c.scale = -0.1f;
  EXPECT_EQ(Initializer::Create(c, 0).status().code(), absl::StatusCode::kInvalidArgument);
  c.scale = NAN;
  EXPECT_EQ(Initializer::Create(c, 0).status().code(), absl::StatusCode::kInvalidArgument);
  c.kind = static_cast<InitKind>(9);
  c.scale = 0.1f;
  EXPECT_EQ(Initializer::Create(c, 0).status().code(), absl::StatusCode::kInvalidArgument);
  c.kind = InitKind::kConstant;
  c.scale = -2.0f;  // a negative constant is fine
  EXPECT_TRUE(Initializer::Create(c, 0).ok());
}

}  // namespace
}  // namespace pstrain::optim
