#include "worker/eval/eval_schedule.h"

#include <gtest/gtest.h>

namespace pstrain::worker {
namespace {

TEST(EvalSchedule, StepRoundsFallOnMultiplesOfN) {
  EvalSchedule s(44, 0, 5);
  EXPECT_TRUE(s.enabled());
  EXPECT_FALSE(s.by_epochs());
  EXPECT_EQ(s.RoundAtStep(43), -1);
  EXPECT_EQ(s.RoundAtStep(44), 0);
  EXPECT_EQ(s.RoundAtStep(88), 1);
  EXPECT_EQ(s.RoundAtStep(0), -1);
  EXPECT_EQ(s.RoundAtEpochEnd(0), -1);
  EXPECT_EQ(s.FirstRound(100, 3), 2);  // resumed after step 100: rounds 0 and 1 are past
  EXPECT_EQ(s.Where(2), "step 132");
  EXPECT_EQ(s.Describe(), "every 44 steps");
}

TEST(EvalSchedule, EpochRoundsFallAtEpochEndsButNotTheLast) {
  EvalSchedule s(0, 1, 3);
  EXPECT_TRUE(s.by_epochs());
  EXPECT_EQ(s.RoundAtStep(10), -1);
  EXPECT_EQ(s.RoundAtEpochEnd(0), 0);
  EXPECT_EQ(s.RoundAtEpochEnd(1), 1);
  EXPECT_EQ(s.RoundAtEpochEnd(2), -1);  // the final evaluation follows the last epoch
  EXPECT_EQ(s.EpochOf(1), 2);
  EvalSchedule two(0, 2, 5);
  EXPECT_EQ(two.RoundAtEpochEnd(0), -1);
  EXPECT_EQ(two.RoundAtEpochEnd(1), 0);
  EXPECT_EQ(two.RoundAtEpochEnd(3), 1);
  EXPECT_EQ(two.RoundAtEpochEnd(4), -1);
  EXPECT_EQ(two.FirstRound(0, 2), 1);  // resumed in epoch 2: the round after epoch 2 is past
  EXPECT_EQ(two.Describe(), "every 2 epochs");
}

// A worker re-admitted after step `at` scores no round at or before it
// (FirstRound starts after them): the lead scores its share of those, and
// waits for none of them. Issue 37: one re-admitted exactly at a round's
// step left that round waiting for good.
TEST(EvalSchedule, AResumedWorkerIsPastEveryStepRoundUpToItsResumeStep) {
  EvalSchedule s(3, 0, 2);
  for (int64_t at : {13, 14, 15, 16}) {
    const int first = s.FirstRound(at, 0);
    for (int round = 0; round < 8; ++round) {
      const int64_t step = (round + 1) * 3;
      EXPECT_EQ(s.ResumedPast(at, step), round < first)
          << "resumed after step " << at << ", round at step " << step;
    }
  }
  EXPECT_TRUE(s.ResumedPast(15, 15));
  EXPECT_FALSE(s.ResumedPast(14, 15));
  EvalSchedule epochs(0, 1, 3);
  EXPECT_FALSE(epochs.ResumedPast(15, 15));  // an epoch round's step is where it was reached
  EXPECT_TRUE(epochs.ResumedPast(16, 15));
}

TEST(EvalSchedule, NoRoundsWhenNeitherIsSet) {
  EvalSchedule s(0, 0, 3);
  EXPECT_FALSE(s.enabled());
  EXPECT_EQ(s.RoundAtStep(10), -1);
  EXPECT_EQ(s.RoundAtEpochEnd(0), -1);
  EXPECT_EQ(s.Describe(), "never");
}

TEST(EvalSchedule, BothKindsOrNegativeCountsAreRefusedNamingTheFlags) {
  EXPECT_TRUE(EvalSchedule::Check(10, 0).ok());
  EXPECT_TRUE(EvalSchedule::Check(0, 2).ok());
  absl::Status both = EvalSchedule::Check(10, 1);
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(both.message().find("--eval_every_steps=10 and --eval_every_epochs=1"), absl::string_view::npos);
  EXPECT_EQ(EvalSchedule::Check(-1, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EvalSchedule::Check(0, -2).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::worker
