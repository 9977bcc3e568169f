// Whole-model gradient checks: the gradients TrainStep writes for every table
// (dense and sparse rows) match central differences of its loss.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/models/model_test_util.h"
#include "tests/worker/nn/grad_check.h"
#include "worker/models/model.h"

namespace pstrain::worker {
namespace {

using testing::LocalParams;
using testing::RandomBatch;
using testing::TinyOptions;

class ModelGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradientTest, StepGradientsMatchFiniteDifferences) {
  auto model_or = CreateModel(TinyOptions(GetParam()));
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(3);
  // Multi-hot bags over few ids: rows repeat within and across samples.
  Batch batch = RandomBatch(6, 3, 3, 3, 4, rng);
  BatchPlan plan;
  model.Plan(batch, &plan);
  LocalParams store(model, 0.5f);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->num_samples, 6);

  std::vector<std::vector<float>> analytic(model.tables().size()), scratch(model.tables().size());
  GradRefs scratch_refs;
  for (const TableSpec& t : model.tables()) {
    analytic[t.id] = store.grad(t.id);
    for (float g : analytic[t.id]) ASSERT_TRUE(std::isfinite(g)) << t.name << " not written";
    scratch[t.id].resize(analytic[t.id].size());
    scratch_refs.tables.push_back(scratch[t.id].data());
  }
  auto loss = [&] {
    auto o = model.TrainStep(batch, plan, params, &scratch_refs);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? o->loss_sum : 0.0;
  };
  testing::GradCheckOptions options;
  options.atol = 3e-3;
  options.rtol = 1e-2;
  options.max_skipped_fraction = 0.05;  // ReLU kinks within eps
  for (const TableSpec& t : model.tables()) {
    float* p = t.kind == TableKind::kDense ? store.dense(t.id).data()
                                           : store.bound_rows(t.id).data();
    ExpectGradientMatches(loss, p, analytic[t.id], analytic[t.id].size(), t.name, options);
  }
}

TEST_P(ModelGradientTest, PredictAgreesWithTrainStepLoss) {
  auto model_or = CreateModel(TinyOptions(GetParam()));
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(4);
  Batch batch = RandomBatch(21, 3, 3, 2, 50, rng);
  BatchPlan plan;
  model.Plan(batch, &plan);
  LocalParams store(model, 0.5f);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> probs(batch.size);
  ASSERT_TRUE(model.Predict(batch, plan, params, probs).ok());
  double loss = 0;
  for (int r = 0; r < batch.size; ++r) {
    ASSERT_GT(probs[r], 0.0f);
    ASSERT_LT(probs[r], 1.0f);
    loss -= batch.labels[r] == 1.0f ? std::log(probs[r]) : std::log(1.0 - probs[r]);
  }
  EXPECT_NEAR(loss, out->loss_sum, 1e-4 * out->loss_sum);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientTest,
                         ::testing::Values("lr", "wide_deep", "dlrm"));

}  // namespace
}  // namespace pstrain::worker
