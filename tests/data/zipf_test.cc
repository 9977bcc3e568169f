#include "data/zipf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/hash.h"

namespace pstrain::worker {
namespace {

struct Uniform {
  uint64_t state = 1;
  double operator()() {
    state += 0x9e3779b97f4a7c15ULL;
    return static_cast<double>(Mix64(state) >> 11) * 0x1.0p-53;
  }
};

TEST(ZipfSampler, FrequenciesMatchTheZipfLaw) {
  for (double s : {0.8, 1.0, 1.1, 2.0}) {
    const int n = 12;
    ZipfSampler zipf(n, s);
    Uniform u;
    std::vector<double> counts(n + 1, 0);
    const int draws = 200000;
    for (int i = 0; i < draws; ++i) {
      uint64_t k = zipf.Sample(u);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, static_cast<uint64_t>(n));
      counts[k] += 1;
    }
    double norm = 0;
    for (int k = 1; k <= n; ++k) norm += std::pow(k, -s);
    for (int k = 1; k <= n; ++k) {
      double p = std::pow(k, -s) / norm;
      double sd = std::sqrt(draws * p * (1 - p));
      EXPECT_NEAR(counts[k], draws * p, 5 * sd) << "s=" << s << " k=" << k;
    }
  }
}

TEST(ZipfSampler, HandlesOneValueAndHugeVocabularies) {
  Uniform u;
  ZipfSampler one(1, 1.1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Sample(u), 1u);
  ZipfSampler huge(uint64_t{1} << 40, 1.1);
  uint64_t max_seen = 0;
  int ones = 0;
  for (int i = 0; i < 100000; ++i) {
    uint64_t k = huge.Sample(u);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, uint64_t{1} << 40);
    max_seen = std::max(max_seen, k);
    ones += k == 1;
  }
  EXPECT_GT(max_seen, 1000000u);  // the tail is reached
  EXPECT_GT(ones, 5000);          // and the head dominates
}

}  // namespace
}  // namespace pstrain::worker
