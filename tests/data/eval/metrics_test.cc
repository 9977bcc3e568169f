#include "data/eval/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace pstrain::worker {
namespace {

// O(n^2) reference: fraction of (positive, negative) pairs ordered right,
// ties counting one half.
double BruteForceAuc(const std::vector<float>& s, const std::vector<float>& y) {
  double num = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] > 0.5f && y[j] < 0.5f) {
        pairs += 1;
        num += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
    }
  }
  return num / pairs;
}

TEST(RocAuc, PerfectAndReversedRankings) {
  std::vector<float> y = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}, y), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{0.4f, 0.3f, 0.2f, 0.1f}, y), 0.0);
}

TEST(RocAuc, HandComputedExample) {
  // Positives at 0.8, 0.4; negatives at 0.6, 0.2, 0.1.
  // Pairs (pos > neg): 0.8 beats all 3; 0.4 beats 0.2, 0.1 -> 5 of 6.
  std::vector<float> s = {0.8f, 0.6f, 0.4f, 0.2f, 0.1f};
  std::vector<float> y = {1, 0, 1, 0, 0};
  EXPECT_DOUBLE_EQ(RocAuc(s, y), 5.0 / 6.0);
}

TEST(RocAuc, TiesCountOneHalf) {
  // Everything tied: 0.5.
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{0.3f, 0.3f, 0.3f}, std::vector<float>{1, 0, 0}),
                   0.5);
  // Positive 0.5 ties one negative 0.5 and beats negative 0.1: (1 + 0.5) / 2.
  // Positive 0.9 beats both: 2 / 2. Total (1.5 + 2) / 4.
  std::vector<float> s = {0.5f, 0.5f, 0.1f, 0.9f};
  std::vector<float> y = {1, 0, 0, 1};
  EXPECT_DOUBLE_EQ(RocAuc(s, y), 3.5 / 4.0);
}

TEST(RocAuc, UndefinedForASingleClassOrNaNScores) {
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{0.1f, 0.9f}, std::vector<float>{1, 1})));
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{0.1f, 0.9f}, std::vector<float>{0, 0})));
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{}, std::vector<float>{})));
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{0.1f, NAN}, std::vector<float>{0, 1})));
}

TEST(RocAuc, MatchesBruteForceOnRandomDataWithTies) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> s, y;
    int n = 1 + rng() % 300;
    for (int i = 0; i < n; ++i) {
      s.push_back(static_cast<float>(rng() % 20) / 20.0f);  // many ties
      y.push_back(static_cast<float>(rng() % 3 == 0));
    }
    double auc = RocAuc(s, y);
    bool both = std::count(y.begin(), y.end(), 1.0f) > 0 && std::count(y.begin(), y.end(), 0.0f) > 0;
    if (!both) {
      EXPECT_TRUE(std::isnan(auc));
      continue;
    }
    EXPECT_NEAR(auc, BruteForceAuc(s, y), 1e-12);
    std::vector<double> sd(s.begin(), s.end());
    EXPECT_EQ(RocAuc(sd, y), auc);
  }
}

TEST(RocAuc, InvariantUnderMonotoneTransforms) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> s, t, y;
  for (int i = 0; i < 1000; ++i) {
    float x = n(rng);
    s.push_back(x);
    t.push_back(1.0f / (1.0f + std::exp(-x)));
    y.push_back(static_cast<float>(x + n(rng) > 0));
  }
  EXPECT_NEAR(RocAuc(s, y), RocAuc(t, y), 1e-3);  // float rounding may add ties
  EXPECT_GT(RocAuc(s, y), 0.7);
}

TEST(LogLoss, HandComputedAndClamped) {
  std::vector<float> p = {0.9f, 0.2f};
  std::vector<float> y = {1, 0};
  double want = -(std::log(0.9) + std::log(0.8)) / 2;
  EXPECT_NEAR(LogLoss(p, y), want, 1e-6);
  // A confident wrong answer is clamped, not infinite.
  double clamped = LogLoss(std::vector<float>{0.0f}, std::vector<float>{1});
  EXPECT_NEAR(clamped, -std::log(1e-7), 1e-6);
  EXPECT_EQ(LogLoss(std::vector<float>{}, std::vector<float>{}), 0.0);
}

TEST(Accuracy, ThresholdsAtOneHalf) {
  std::vector<float> p = {0.5f, 0.49f, 0.9f, 0.1f};
  std::vector<float> y = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(Accuracy(p, y), 0.5);
}

TEST(MetricsAccumulator, EqualsOneShotMetrics) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> p, y;
  MetricsAccumulator acc;
  for (int b = 0; b < 10; ++b) {
    std::vector<float> bp, by;
    for (int i = 0; i < 37; ++i) {
      bp.push_back(u(rng));
      by.push_back(static_cast<float>(u(rng) < bp.back()));
    }
    acc.Add(bp, by);
    p.insert(p.end(), bp.begin(), bp.end());
    y.insert(y.end(), by.begin(), by.end());
  }
  BinaryMetrics a = acc.Compute(), b = ComputeBinaryMetrics(p, y);
  EXPECT_EQ(acc.count(), 370);
  EXPECT_EQ(a.count, 370);
  EXPECT_EQ(a.auc, b.auc);
  EXPECT_EQ(a.logloss, b.logloss);
  EXPECT_EQ(a.accuracy, b.accuracy);
  EXPECT_NEAR(a.mean_prediction, 0.5, 0.05);
  acc.Reset();
  EXPECT_EQ(acc.count(), 0);
}

}  // namespace
}  // namespace pstrain::worker

namespace pstrain::worker {
namespace {

TEST(NormalizedEntropy, IsOneForThePredictorOfTheBaseRateAndBelowForABetterOne) {
  // 3 % clicks, predicted at exactly the base rate: NE 1, calibration 1.
  std::vector<float> labels(1000, 0.0f), base(1000, 0.03f);
  for (int i = 0; i < 30; ++i) labels[i * 33] = 1.0f;
  BinaryMetrics m = ComputeBinaryMetrics(base, labels);
  EXPECT_NEAR(m.normalized_entropy, 1.0, 1e-6);
  EXPECT_NEAR(m.calibration, 1.0, 1e-6);
  EXPECT_NEAR(BaseRateEntropy(0.03), -(0.03 * std::log(0.03) + 0.97 * std::log(0.97)), 1e-12);
  // Higher on the clicks, lower elsewhere: below 1.
  std::vector<float> better(1000, 0.02f);
  for (int i = 0; i < 30; ++i) better[i * 33] = 0.3f;
  m = ComputeBinaryMetrics(better, labels);
  EXPECT_LT(m.normalized_entropy, 0.9);
  EXPECT_NEAR(m.normalized_entropy, m.logloss / BaseRateEntropy(0.03), 1e-9);
  // Twice the base rate everywhere: over-predicts 2x.
  std::vector<float> twice(1000, 0.06f);
  EXPECT_NEAR(ComputeBinaryMetrics(twice, labels).calibration, 2.0, 1e-6);
}

TEST(NormalizedEntropy, IsUndefinedWhenEveryLabelIsTheSame) {
  std::vector<float> zeros(10, 0.0f), probs(10, 0.2f);
  BinaryMetrics m = ComputeBinaryMetrics(probs, zeros);
  EXPECT_TRUE(std::isnan(m.normalized_entropy));
  EXPECT_TRUE(std::isnan(m.calibration));
  EXPECT_EQ(BaseRateEntropy(0.0), 0.0);
  EXPECT_EQ(BaseRateEntropy(1.0), 0.0);
}

TEST(EvalEventLine, CarriesNormalizedEntropyAndCalibration) {
  std::vector<float> labels = {0, 1, 0, 1}, probs = {0.2f, 0.7f, 0.4f, 0.6f};
  const std::string line = EvalEventLine(5, ComputeBinaryMetrics(probs, labels), 1.0).str();
  EXPECT_NE(line.find("\"eval_ne\":"), std::string::npos) << line;
  EXPECT_NE(line.find("\"eval_calibration\":"), std::string::npos) << line;
}

}  // namespace
}  // namespace pstrain::worker
