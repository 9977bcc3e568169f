// Once warmed up on its largest batch, a model's Plan() and TrainStep()
// allocate nothing: every buffer is reused. Counted by replacing the global
// operator new in this test binary (counting only while enabled).
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

// The replacement pairs malloc with free on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace pstrain::worker {
namespace {

class SteadyStateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SteadyStateTest, PlanAndTrainStepDoNotAllocate) {
  ModelOptions options;
  options.name = GetParam();
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok());
  Model& model = **model_or;
  std::mt19937 rng(1);
  Batch big = testing::RandomBatch(700, 13, 26, 2, 100000, rng);
  Batch small = testing::RandomBatch(300, 13, 26, 2, 100000, rng);
  testing::LocalParams store(model);
  BatchPlan plan;
  ParamRefs params;
  GradRefs grads;
  model.Plan(big, &plan);
  store.Bind(plan, &params, &grads);
  ASSERT_TRUE(model.TrainStep(big, plan, params, &grads).ok());
  // Bind the small batch before counting (the test's store allocates).
  BatchPlan small_plan;
  model.Plan(small, &small_plan);
  ParamRefs small_params;
  GradRefs small_grads;
  store.Bind(small_plan, &small_params, &small_grads);

  g_allocations = 0;
  g_counting = true;
  ::operator delete(::operator new(4));  // the counter works (direct calls are not elided)
  g_counting = false;
  ASSERT_EQ(g_allocations.load(), 1);

  g_allocations = 0;
  g_counting = true;
  model.Plan(big, &plan);
  auto a = model.TrainStep(big, plan, params, &grads);
  model.Plan(small, &small_plan);
  auto b = model.TrainStep(small, small_plan, small_params, &small_grads);
  g_counting = false;
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(g_allocations.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, SteadyStateTest, ::testing::Values("lr", "wide_deep", "dlrm", "dcn_v2", "deepfm"));

}  // namespace
}  // namespace pstrain::worker
