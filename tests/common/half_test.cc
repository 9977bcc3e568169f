// fp16 and bf16 conversions (common/half.h): exact round trips, rounding to
// nearest even at the edges, and unbiased stochastic rounding.
#include "common/half.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h << " = " << f;
    ASSERT_EQ(FloatToHalf(f, /*stochastic=*/true, 0x1fff), h) << "exact values never round";
  }
}

TEST(Half, RoundsToNearestEvenAtTheEdges) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);       // the largest half
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);       // rounds down to it
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);       // half way: to even, i.e. infinity
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);       // the smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-26f), 0x0000);       // a quarter of it: zero
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);     // 1.5 units: to even (2)
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);       // the smallest normal
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);           // tie: to even
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // past the tie
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(Half, StochasticRoundingIsUnbiased) {
  std::mt19937 rng(1);
  for (float x : {0.1f, -0.0123f, 3.3333f, 0x1.3p-20f /* subnormal */}) {
    double sum = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) sum += HalfToFloat(FloatToHalf(x, true, rng()));
    const float lo = HalfToFloat(FloatToHalf(x));  // one of the two neighbours
    const double ulp = std::fabs(HalfToFloat(FloatToHalf(x) + 1) - lo);
    EXPECT_NEAR(sum / n, x, 0.01 * ulp) << x;
    // Round to nearest is biased by up to half an ulp; this is not.
  }
}

TEST(Bfloat16, RoundTripsRoundsAndIsUnbiased) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bfloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBfloat16(f), b) << std::hex << b;
  }
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1p-8f), 0x3f80);           // tie: to even
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
  std::mt19937 rng(2);
  double sum = 0;
  const int n = 200000;
  const float x = 0.0471f;
  for (int i = 0; i < n; ++i) sum += Bfloat16ToFloat(FloatToBfloat16(x, true, rng()));
  EXPECT_NEAR(sum / n, x, 0.01 * 0x1p-12);
}

}  // namespace
}  // namespace pstrain
