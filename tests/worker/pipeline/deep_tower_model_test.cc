// The deep_tower model (the unsplit reference of the pipeline tests): its
// gradients match central differences of its loss, Predict agrees with the
// training loss, and a deep tower keeps its signal (He initialization).
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_grad_check.h"
#include "tests/model/models/model_test_util.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker {
namespace {

using testing::LocalParams;
using testing::RandomBatch;

ModelOptions Tiny() {
  ModelOptions o = testing::TinyOptions("deep_tower");
  o.deep_mlp = {6, 5, 4};
  return o;
}

TEST(DeepTowerModel, StepGradientsMatchFiniteDifferences) {
  testing::ExpectStepGradientsMatchFiniteDifferences(Tiny());
}

TEST(DeepTowerModel, PredictAgreesWithTheTrainingLoss) {
  auto model = CreateModel(Tiny());
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(4);
  Batch batch = RandomBatch(300, 3, 3, 2, 50, rng);  // two CPU chunks
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  LocalParams store(**model, 0.5f);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  auto out = (*model)->TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> probs(batch.size);
  ASSERT_TRUE((*model)->Predict(batch, plan, params, probs).ok());
  double loss = 0;
  for (int r = 0; r < batch.size; ++r) {
    loss -= batch.labels[r] == 1.0f ? std::log(probs[r]) : std::log(1.0 - probs[r]);
  }
  EXPECT_NEAR(loss, out->loss_sum, 1e-4 * out->loss_sum);
}

TEST(DeepTowerModel, TwentyFourLayersKeepTheLogitsAwayFromZero) {
  ModelOptions o = Tiny();
  o.deep_mlp.assign(24, 64);
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(5);
  Batch batch = RandomBatch(64, 3, 3, 1, 50, rng);
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  LocalParams store(**model);  // the model's own initializers
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  std::vector<float> probs(batch.size);
  ASSERT_TRUE((*model)->Predict(batch, plan, params, probs).ok());
  double spread = 0;
  for (float p : probs) spread += std::abs(p - 0.5);
  // With PyTorch's default bound the signal shrinks ~2.4x per layer and
  // every probability would be 0.5.
  EXPECT_GT(spread / batch.size, 1e-3);
}

}  // namespace
}  // namespace pstrain::worker
