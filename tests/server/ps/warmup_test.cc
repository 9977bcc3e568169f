// Learning-rate warm-up: the servers scale each push's learning rate by
// min(1, (step + 1) / warmup_steps) for the step (worker clock) it belongs to.
#include <vector>

#include "gtest/gtest.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {
namespace {

std::unique_ptr<KvStore> SgdStore(int32_t warmup_steps) {
  TableSpec t;
  t.id = 0;
  t.name = "w";
  t.kind = TableKind::kDense;
  t.size = 2;
  t.optimizer.kind = OptimizerKind::kSgd;
  t.optimizer.lr = 1.0f;
  t.optimizer.warmup_steps = warmup_steps;
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

}  // namespace
}  // namespace pstrain::server
