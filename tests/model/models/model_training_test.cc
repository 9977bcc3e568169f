// Learning sanity: every model, trained by plain SGD on a synthetic task
// that it can represent, lowers its loss on fresh batches.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "common/hash.h"
#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

// Labels from a hidden logistic model: a per-(field, id) effect plus a linear
// term of the dense features.
class Teacher {
 public:
  explicit Teacher(int num_dense) : num_dense_(num_dense) {}

  Batch Draw(int size, std::mt19937& rng) const {
    Batch b = testing::RandomBatch(size, num_dense_, kFields, 1, kIdsPerField, rng);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int r = 0; r < size; ++r) {
      double z = -0.5;
      for (int f = 0; f < kFields; ++f) {
        const uint64_t id = b.ids[f][b.offsets[f][r]];
        z += 3.0 * (UnitFloat(Mix64(id * 131 + f)) - 0.5);
      }
      for (int d = 0; d < num_dense_; ++d) z += (d % 2 ? 0.8 : -0.6) * b.dense[r * num_dense_ + d];
      b.labels[r] = unit(rng) < 1.0 / (1.0 + std::exp(-z)) ? 1.0f : 0.0f;
    }
    return b;
  }

  static constexpr int kFields = 3;
  static constexpr int kIdsPerField = 20;

 private:
  int num_dense_;
};

class ModelTrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelTrainingTest, SgdLowersTheLossOnALearnableTask) {
  ModelOptions options = testing::TinyOptions(GetParam());
  options.num_sparse = Teacher::kFields;
  options.embedding_dim = 8;
  options.bottom_mlp = {16, 8};
  options.top_mlp = {16};
  options.deep_mlp = {16};
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  Teacher teacher(options.num_dense);
  std::mt19937 rng(8);
  testing::LocalParams store(model);
  BatchPlan plan;
  ParamRefs params;
  GradRefs grads;
  const int batch_size = 128, steps = 300, window = 30;
  const float lr = 0.3f;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    Batch batch = teacher.Draw(batch_size, rng);
    model.Plan(batch, &plan);
    store.Bind(plan, &params, &grads);
    auto out = model.TrainStep(batch, plan, params, &grads);
    ASSERT_TRUE(out.ok()) << out.status();
    const double mean_loss = out->loss_sum / out->num_samples;
    if (step < window) first += mean_loss / window;
    if (step >= steps - window) last += mean_loss / window;
    store.ApplySgd(plan, lr / batch_size);  // gradients are of the sum
  }
  std::printf("%s: mean loss %.4f over the first %d steps, %.4f over the last %d\n",
              GetParam().c_str(), first, window, last, window);
  EXPECT_LT(last, first - 0.05);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTrainingTest, ::testing::Values("lr", "wide_deep", "dlrm", "dcn_v2", "deepfm"));

}  // namespace
}  // namespace pstrain::worker
