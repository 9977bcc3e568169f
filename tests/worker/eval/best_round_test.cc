#include "worker/eval/best_round.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pstrain::worker {
namespace {

EvalRound Round(int round, double auc, double logloss) {
  return EvalRound{round, int64_t{round} * 50, auc, logloss};
}

TEST(BestRound, KeepsTheHighestAucAndCountsRoundsWithoutImprovement) {
  BestRound b(EvalMetric::kAuc, /*patience=*/2);
  EXPECT_TRUE(b.Offer(Round(1, 0.70, 0.6)));
  EXPECT_TRUE(b.Offer(Round(2, 0.81, 0.5)));
  EXPECT_FALSE(b.Offer(Round(3, 0.75, 0.4)));  // a lower log loss does not count
  EXPECT_EQ(b.rounds_since_best(), 1);
  EXPECT_FALSE(b.ShouldStop());
  EXPECT_FALSE(b.Offer(Round(4, 0.81, 0.4)));  // equal is not better
  EXPECT_TRUE(b.ShouldStop());
  ASSERT_TRUE(b.best().has_value());
  EXPECT_EQ(b.best()->round, 2);
  EXPECT_EQ(b.best()->step, 100);
}

TEST(BestRound, LoglossIsBetterWhenLower) {
  BestRound b(EvalMetric::kLogloss, /*patience=*/0);
  EXPECT_TRUE(b.Offer(Round(1, 0.9, 0.50)));
  EXPECT_TRUE(b.Offer(Round(2, 0.6, 0.45)));
  EXPECT_FALSE(b.Offer(Round(3, 0.95, 0.47)));
  EXPECT_EQ(b.best()->round, 2);
  // Patience 0: never stops, however long it has not improved.
  for (int r = 4; r < 20; ++r) b.Offer(Round(r, 0.5, 0.9));
  EXPECT_FALSE(b.ShouldStop());
}

TEST(BestRound, ANanMetricIsNeverTheBest) {
  BestRound b(EvalMetric::kAuc, /*patience=*/3);
  EXPECT_FALSE(b.Offer(Round(1, NAN, 0.5)));
  EXPECT_FALSE(b.best().has_value());
  EXPECT_TRUE(b.Offer(Round(2, 0.6, 0.5)));
  EXPECT_FALSE(b.Offer(Round(3, NAN, 0.5)));
  EXPECT_EQ(b.best()->round, 2);
}

TEST(BestRound, AStoredBestRoundGoesOnFromThere) {
  BestRound first(EvalMetric::kAuc, /*patience=*/2);
  first.Offer(Round(1, 0.7, 0.6));
  first.Offer(Round(2, 0.8125, 0.5));
  BestRound next(EvalMetric::kAuc, /*patience=*/2);
  ASSERT_TRUE(next.Restore(first.Encode()).ok());
  EXPECT_EQ(next.best()->round, 2);
  EXPECT_DOUBLE_EQ(next.best()->auc, 0.8125);
  // A rolled-back attempt evaluates round 1 again: not an improvement, and
  // not counted past the best round.
  EXPECT_FALSE(next.Offer(Round(1, 0.75, 0.6)));
  EXPECT_EQ(next.rounds_since_best(), 0);
  EXPECT_FALSE(next.Offer(Round(4, 0.79, 0.6)));
  EXPECT_TRUE(next.ShouldStop());
  EXPECT_EQ(next.Restore("garbage").code(), absl::StatusCode::kDataLoss);
}

TEST(ParseEvalMetric, NamesTheKnownMetrics) {
  EXPECT_EQ(*ParseEvalMetric("eval_auc"), EvalMetric::kAuc);
  EXPECT_EQ(*ParseEvalMetric("eval_logloss"), EvalMetric::kLogloss);
  absl::StatusOr<EvalMetric> bad = ParseEvalMetric("auc");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("eval_logloss"), std::string::npos);
}

}  // namespace
}  // namespace pstrain::worker
