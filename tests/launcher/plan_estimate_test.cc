#include "launcher/plan_estimate.h"

#include <gtest/gtest.h>

namespace pstrain::launcher {
namespace {

PlanInputs Tower(int workers) {
  PlanInputs in;
  in.model.name = "deep_tower";
  in.model.num_dense = 13;
  in.model.num_sparse = 26;
  in.model.embedding_dim = 16;
  in.model.deep_mlp.assign(8, 256);
  in.batch_size = 128;
  in.workers = workers;
  in.servers = 2;
  return in;
}

TEST(PlanEstimate, ListsEveryLayoutOfTheWorkersFeasibleOnesFirst) {
  auto layouts = EstimateLayouts(Tower(4));
  ASSERT_TRUE(layouts.ok()) << layouts.status();
  int with_m1 = 0;
  bool infeasible_seen = false;
  for (const LayoutEstimate& e : *layouts) {
    EXPECT_EQ(e.replicas * e.stages * e.tp, 4);
    if (e.stages == 1) EXPECT_EQ(e.microbatches, 1);
    if (e.microbatches == 1) ++with_m1;
    if (!e.feasible) infeasible_seen = true;
    if (infeasible_seen) EXPECT_FALSE(e.feasible);  // sorted
    EXPECT_GT(e.total, e.baseline);
    EXPECT_NEAR(e.total, e.baseline + e.weights + e.gradients + e.activations, 1);
  }
  EXPECT_EQ(with_m1, 3);  // (4,1,1), (2,1,2), (1,1,4)
  EXPECT_GE(layouts->size(), 6u);
}

TEST(PlanEstimate, StagesAndTensorParallelismCutTheWeightsOfAWorker) {
  const PlanInputs in = Tower(4);
  auto whole = EstimateLayout(in, 4, 1, 1, 1);
  auto stages = EstimateLayout(in, 2, 2, 1, 2);
  auto tp = EstimateLayout(in, 2, 1, 2, 1);
  ASSERT_TRUE(whole.ok() && stages.ok() && tp.ok());
  EXPECT_LT(stages->weights, 0.7 * whole->weights);
  EXPECT_LT(tp->weights, 0.7 * whole->weights);
  EXPECT_EQ(whole->comm_tp, 0);
  EXPECT_GT(tp->comm_tp, 0);
  EXPECT_EQ(tp->comm_pipeline, 0);
  EXPECT_GT(stages->comm_pipeline, 0);
}

TEST(PlanEstimate, GpipeKeepsMoreActivationsThanOneFOneB) {
  PlanInputs in = Tower(2);
  auto f1b = EstimateLayout(in, 1, 2, 1, 8);
  in.schedule = worker::PipeSchedule::kGpipe;
  auto gpipe = EstimateLayout(in, 1, 2, 1, 8);
  ASSERT_TRUE(f1b.ok() && gpipe.ok());
  EXPECT_GT(gpipe->activations, f1b->activations);
}

TEST(PlanEstimate, ALayoutLargerThanTheDeviceMemoryIsInfeasible) {
  PlanInputs in = Tower(2);
  in.device_memory_bytes = 1e6;
  auto e = EstimateLayout(in, 2, 1, 1, 1);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->feasible);
  EXPECT_EQ(e->why_not, "exceeds --device_memory");
}

TEST(PlanEstimate, TooManyStagesIsAnError) {
  auto e = EstimateLayout(Tower(16), 1, 16, 1, 16);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::launcher
