#include <cmath>
#include <limits>
#include <vector>

#include "common/optim/finite.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

TEST(FindNonFinite, ReturnsLengthWhenAllValuesAreFinite) {
  std::vector<float> v(1000, 1.0f);
  v[3] = std::numeric_limits<float>::max();
  v[4] = std::numeric_limits<float>::denorm_min();
  v[5] = -0.0f;
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 1000u);
  EXPECT_TRUE(AllFinite(v.data(), 0));
}

TEST(FindNonFinite, FindsFirstNanOrInfinityAnywhere) {
  for (size_t pos : {0u, 255u, 256u, 700u, 999u}) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> v(1000, 0.5f);
      v[pos] = bad;
      if (pos + 10 < v.size()) v[pos + 10] = NAN;
      EXPECT_EQ(FindNonFinite(v.data(), v.size()), pos);
    }
  }
}

}  // namespace
}  // namespace pstrain::optim
