// The GPipe and 1F1B schedules, their replay and the tower partition.
#include "worker/pipeline/schedule.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "worker/pipeline/pipeline_model.h"

namespace pstrain::worker {
namespace {

constexpr PipeOpKind F = PipeOpKind::kForward;
constexpr PipeOpKind B = PipeOpKind::kBackward;

TEST(Schedule, GpipeRunsAllForwardsThenAllBackwards) {
  std::vector<PipeOp> ops = BuildSchedule(PipeSchedule::kGpipe, 3, 1, 3);
  std::vector<PipeOp> want = {{F, 0}, {F, 1}, {F, 2}, {B, 0}, {B, 1}, {B, 2}};
  EXPECT_EQ(ops, want);
  EXPECT_EQ(PeakLiveMicrobatches(ops), 3);
}

TEST(Schedule, OneFOneBWarmsUpThenAlternates) {
  // Stage 0 of 3: two warm-up forwards.
  std::vector<PipeOp> want = {{F, 0}, {F, 1}, {F, 2}, {B, 0}, {F, 3}, {B, 1}, {B, 2}, {B, 3}};
  EXPECT_EQ(BuildSchedule(PipeSchedule::k1F1B, 3, 0, 4), want);
  // The last stage alternates from the start.
  want = {{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}, {F, 3}, {B, 3}};
  EXPECT_EQ(BuildSchedule(PipeSchedule::k1F1B, 3, 2, 4), want);
}

TEST(Schedule, OneFOneBHoldsAtMostPMinusStageMicrobatches) {
  for (int p = 1; p <= 5; ++p) {
    for (int m = 1; m <= 9; ++m) {
      for (int k = 0; k < p; ++k) {
        auto ops = BuildSchedule(PipeSchedule::k1F1B, p, k, m);
        EXPECT_EQ(ops.size(), 2u * m);
        EXPECT_EQ(PeakLiveMicrobatches(ops), std::min(p - k, m)) << p << " " << m << " " << k;
        EXPECT_EQ(PeakLiveMicrobatches(BuildSchedule(PipeSchedule::kGpipe, p, k, m)), m);
      }
    }
  }
}

TEST(Schedule, EveryShapeFinishesWithoutDeadlock) {
  for (PipeSchedule s : {PipeSchedule::kGpipe, PipeSchedule::k1F1B}) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 9; ++m) {  // includes M < P, M = 1, P = 1
        std::vector<std::vector<double>> f(p, std::vector<double>(m, 1.0)), b = f;
        auto r = ReplaySchedule(s, f, b);
        ASSERT_TRUE(r.ok()) << ScheduleName(s) << " P=" << p << " M=" << m << ": " << r.status();
      }
    }
  }
}

TEST(Schedule, EqualOpCostsGiveTheIdealBubble) {
  for (PipeSchedule s : {PipeSchedule::kGpipe, PipeSchedule::k1F1B}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        std::vector<std::vector<double>> f(p, std::vector<double>(m, 1.0)), b = f;
        auto r = ReplaySchedule(s, f, b);
        ASSERT_TRUE(r.ok());
        EXPECT_NEAR(r->bubble, IdealBubble(p, m), 1e-12) << ScheduleName(s) << p << m;
        EXPECT_DOUBLE_EQ(r->makespan, 2.0 * (m + p - 1));
      }
    }
  }
  EXPECT_DOUBLE_EQ(IdealBubble(2, 8), 1.0 / 9);
}

TEST(Schedule, ParseNamesBothSchedules) {
  EXPECT_EQ(*ParseSchedule("GPipe"), PipeSchedule::kGpipe);
  EXPECT_EQ(*ParseSchedule("1f1b"), PipeSchedule::k1F1B);
  EXPECT_EQ(ParseSchedule("zero-bubble").status().code(), absl::StatusCode::kInvalidArgument);
}

ModelOptions TowerOptions(int layers, int width) {
  ModelOptions o;
  o.name = "deep_tower";
  o.num_dense = 3;
  o.num_sparse = 2;
  o.embedding_dim = 4;
  o.deep_mlp.assign(layers, width);
  return o;
}

TEST(Partition, EqualLayersAreSplitEvenly) {
  ModelOptions o = TowerOptions(24, 64);
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok());
  auto spec = DescribePipelineModel(o, **model, 256);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tower.size(), 25u);  // 24 hidden + the logit
  auto p = PartitionTower(*spec, 4, "");
  ASSERT_TRUE(p.ok());
  // Layer 0 is narrow (11 inputs) and the logit tiny: 6-7 layers per stage.
  for (int k = 0; k < 4; ++k) {
    EXPECT_GE(p->end(k) - p->begin(k), 6) << DescribePartition(*spec, *p);
    EXPECT_LE(p->end(k) - p->begin(k), 7) << DescribePartition(*spec, *p);
  }
  EXPECT_EQ(p->begin(0), 0);
  EXPECT_EQ(p->end(3), 25);
}

TEST(Partition, ExplicitRangesAreChecked) {
  ModelOptions o = TowerOptions(5, 8);
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok());
  auto spec = DescribePipelineModel(o, **model, 64);
  ASSERT_TRUE(spec.ok());
  auto p = PartitionTower(*spec, 2, "0-1,2-5");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->end(0), 2);
  EXPECT_EQ(p->end(1), 6);
  for (const char* bad : {"0-1,3-5", "0-2", "0-1,2-4", "1-2,3-5", "0-x,2-5", "0-3,2-5"}) {
    EXPECT_EQ(PartitionTower(*spec, 2, bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(PartitionTower(*spec, 7, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Partition, DlrmTowerIsItsTopMlp) {
  ModelOptions o;  // dlrm defaults: top 64,32 + logit
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok());
  auto spec = DescribePipelineModel(o, **model, 1024);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->tower.size(), 3u);
  EXPECT_EQ(spec->tower[0].in, 16 + 27 * 26 / 2);
  EXPECT_EQ(spec->tower[2].out, 1);
  EXPECT_TRUE(PartitionTower(*spec, 3, "").ok());
  o.name = "wide_deep";
  auto wd = CreateModel(o);
  ASSERT_TRUE(wd.ok());
  EXPECT_EQ(DescribePipelineModel(o, **wd, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::worker
