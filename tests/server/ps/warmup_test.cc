// Learning-rate schedule: the servers scale each push's learning rate by
// min(1, (step + 1) / warmup_steps) for the step (worker clock) it belongs to,
// times the linear decay from decay_start over decay_steps to decay_end.
#include <vector>

#include "gtest/gtest.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {
namespace {

std::unique_ptr<KvStore> SgdStore(int32_t warmup_steps, int64_t decay_start = 0,
                                  int64_t decay_steps = 0, float decay_end = 0) {
  TableSpec t;
  t.id = 0;
  t.name = "w";
  t.kind = TableKind::kDense;
  t.size = 2;
  t.optimizer.kind = OptimizerKind::kSgd;
  t.optimizer.lr = 1.0f;
  t.optimizer.warmup_steps = warmup_steps;
  t.optimizer.decay_start = decay_start;
  t.optimizer.decay_steps = decay_steps;
  t.optimizer.decay_end = decay_end;
  t.init.kind = InitKind::kZeros;
  auto layout = ComputeLayout({t}, 1, 1 << 16);
  EXPECT_TRUE(layout.ok()) << layout.status();
  layout->num_workers = 1;
  auto store = KvStore::Create(*layout, 0);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

float PushAt(KvStore& store, int64_t step) {
  std::vector<float> g = {1.0f, 1.0f};
  KvOp op;
  op.table = 0;
  op.count = 2;
  op.values = g;
  float before = store.dense(0)->weights()[0];
  EXPECT_TRUE(store.Push({op}, 1.0f, step).ok());
  return before - store.dense(0)->weights()[0];  // the step taken: lr * scale * g
}

TEST(Warmup, StepsRampLinearlyThenStayAtTheLearningRate) {
  auto store = SgdStore(4);
  EXPECT_FLOAT_EQ(PushAt(*store, 0), 0.25f);
  EXPECT_FLOAT_EQ(PushAt(*store, 1), 0.5f);
  EXPECT_FLOAT_EQ(PushAt(*store, 2), 0.75f);
  EXPECT_FLOAT_EQ(PushAt(*store, 3), 1.0f);
  EXPECT_FLOAT_EQ(PushAt(*store, 50), 1.0f);
}

TEST(Warmup, NoneOrAnUnknownStepIsTheFullLearningRate) {
  auto none = SgdStore(0);
  EXPECT_FLOAT_EQ(PushAt(*none, 0), 1.0f);
  auto warm = SgdStore(10);
  EXPECT_FLOAT_EQ(PushAt(*warm, -1), 1.0f);
}

TEST(LrDecay, FallsLinearlyFromItsStartToItsEndFractionThenStays) {
  auto store = SgdStore(0, /*decay_start=*/10, /*decay_steps=*/4, /*decay_end=*/0.2f);
  EXPECT_FLOAT_EQ(PushAt(*store, 9), 1.0f);
  EXPECT_FLOAT_EQ(PushAt(*store, 10), 1.0f);
  EXPECT_FLOAT_EQ(PushAt(*store, 11), 0.8f);
  EXPECT_FLOAT_EQ(PushAt(*store, 12), 0.6f);
  EXPECT_FLOAT_EQ(PushAt(*store, 14), 0.2f);
  EXPECT_FLOAT_EQ(PushAt(*store, 1000), 0.2f);
}

TEST(LrDecay, MultipliesTheWarmUp) {
  auto store = SgdStore(4, /*decay_start=*/0, /*decay_steps=*/10, /*decay_end=*/0.0f);
  EXPECT_FLOAT_EQ(PushAt(*store, 1), 0.5f * 0.9f);
  EXPECT_FLOAT_EQ(PushAt(*store, 5), 0.5f);
}

}  // namespace
}  // namespace pstrain::server
