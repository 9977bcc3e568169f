// CreateModel(), the table lists of the models, and TrainStep's checks of
// its inputs.
#include <map>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

std::map<std::string, TableSpec> ByName(const Model& model) {
  std::map<std::string, TableSpec> out;
  for (size_t i = 0; i < model.tables().size(); ++i) {
    EXPECT_EQ(model.tables()[i].id, i) << "TableSpec::id must equal the position";
    out[model.tables()[i].name] = model.tables()[i];
  }
  return out;
}

TEST(CreateModel, UnknownNameIsInvalidArgument) {
  ModelOptions options;
  options.name = "gbdt";
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateModel, DeepTowerHasATowerAndOneEmbeddingPerField) {
  ModelOptions options;
  options.name = "deep_tower";
  options.deep_mlp = {32, 32, 32};
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tables = ByName(**model);
  EXPECT_EQ(tables.size(), 2u * 4 + 26);  // 3 hidden layers + the logit, 26 embeddings
  EXPECT_EQ(tables["tower.0.weight"].size, 32u * (26 * 16 + 13));
  EXPECT_EQ(tables["tower.3.weight"].size, 32u);
  EXPECT_EQ(tables["emb.C26"].kind, TableKind::kSparse);
}

TEST(CreateModel, DlrmBottomMustEndAtTheEmbeddingDim) {
  ModelOptions options;
  options.bottom_mlp = {64, 32};
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.bottom_mlp = {};
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateModel, NonPositiveWidthIsInvalidArgument) {
  ModelOptions options;
  options.top_mlp = {64, 0};
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = ModelOptions();
  options.name = "wide_deep";
  options.deep_mlp = {-3};
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateModel, UnknownDeviceIsInvalidArgument) {
  ModelOptions options;
  options.device = "fpga";
  EXPECT_EQ(CreateModel(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateModel, CudaIsUnavailableWithoutAGpu) {
  ModelOptions options;
  options.device = "cuda";
  auto model = CreateModel(options);
  if (!model.ok()) {
    EXPECT_EQ(model.status().code(), absl::StatusCode::kUnavailable) << model.status();
  }
}

TEST(DlrmTables, FollowTheNamingShapeAndOptimizerConventions) {
  ModelOptions options;
  options.dense_optimizer.kind = OptimizerKind::kAdam;
  options.sparse_optimizer.kind = OptimizerKind::kRowwiseAdagrad;
  options.seed = 77;
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto t = ByName(**model);
  EXPECT_EQ(t.size(), 2u * 2 + 2u * 3 + 26u);
  EXPECT_EQ(t["bottom.0.weight"].size, 64u * 13);
  EXPECT_EQ(t["bottom.1.weight"].size, 16u * 64);
  EXPECT_EQ(t["bottom.1.bias"].size, 16u);
  EXPECT_EQ(t["top.0.weight"].size, 64u * 367);
  EXPECT_EQ(t["top.1.weight"].size, 32u * 64);
  EXPECT_EQ(t["top.2.weight"].size, 32u);
  EXPECT_EQ(t["top.2.bias"].size, 1u);
  for (int f = 1; f <= 26; ++f) {
    const TableSpec& e = t["emb.C" + std::to_string(f)];
    EXPECT_EQ(e.kind, TableKind::kSparse);
    EXPECT_EQ(e.dim, 16u);
    EXPECT_EQ(e.optimizer.kind, OptimizerKind::kRowwiseAdagrad);
    EXPECT_EQ(e.init.kind, InitKind::kUniform);
    EXPECT_FLOAT_EQ(e.init.scale, 0.1f);  // --embedding_init's default
    EXPECT_EQ(e.init.seed, 77u);
  }
  EXPECT_EQ(t["top.0.weight"].kind, TableKind::kDense);
  EXPECT_EQ(t["top.0.weight"].optimizer.kind, OptimizerKind::kAdam);
  EXPECT_EQ(t["top.0.weight"].init.kind, InitKind::kUniform);
  EXPECT_FLOAT_EQ(t["top.0.weight"].init.scale, 1.0f / std::sqrt(367.0f));
  // Biases as PyTorch's nn.Linear: U(+-1/sqrt(fan_in)); zeros on request.
  EXPECT_EQ(t["top.0.bias"].init.kind, InitKind::kUniform);
  EXPECT_FLOAT_EQ(t["top.0.bias"].init.scale, 1.0f / std::sqrt(367.0f));
  EXPECT_FLOAT_EQ(t["bottom.1.bias"].init.scale, 1.0f / std::sqrt(64.0f));
  ASSERT_EQ((*model)->sparse_tables().size(), 26u);
  for (uint32_t id : (*model)->sparse_tables()) {
    EXPECT_EQ((*model)->tables()[id].kind, TableKind::kSparse);
  }
}

TEST(DlrmTables, ZeroBiasesOnRequest) {
  ModelOptions o;
  o.uniform_biases = false;
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  int biases = 0;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0) {
      EXPECT_EQ(t.init.kind, InitKind::kZeros) << t.name;
      ++biases;
    }
  }
  EXPECT_EQ(biases, 5);
}

TEST(LrTables, AreOneWidePerFieldPlusDenseWeightsAndBias) {
  ModelOptions options;
  options.name = "lr";
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok());
  auto t = ByName(**model);
  EXPECT_EQ(t.size(), 2u + 26u);
  EXPECT_EQ(t["lr.dense.weight"].size, 13u);
  EXPECT_EQ(t["lr.bias"].size, 1u);
  EXPECT_EQ(t["lr.C26"].dim, 1u);
  EXPECT_EQ(t["lr.C26"].init.kind, InitKind::kZeros);
}

TEST(WideDeepTables, HaveWideWeightsEmbeddingsAndTheDeepTower) {
  ModelOptions options;
  options.name = "wide_deep";
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok());
  auto t = ByName(**model);
  EXPECT_EQ(t.size(), 26u * 2 + 2u * 3);
  EXPECT_EQ(t["deep.0.weight"].size, 256u * (26 * 16 + 13));
  EXPECT_EQ(t["deep.2.weight"].size, 128u);
  EXPECT_EQ(t["wide.C3"].dim, 1u);
  EXPECT_EQ(t["emb.C3"].dim, 16u);
}

class TrainStepChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = CreateModel(testing::TinyOptions("dlrm"));
    ASSERT_TRUE(model.ok());
    model_ = std::move(*model);
    std::mt19937 rng(1);
    batch_ = testing::RandomBatch(10, 3, 3, 2, 5, rng);
    model_->Plan(batch_, &plan_);
    store_ = std::make_unique<testing::LocalParams>(*model_);
    store_->Bind(plan_, &params_, &grads_);
  }
  std::unique_ptr<Model> model_;
  Batch batch_;
  BatchPlan plan_;
  std::unique_ptr<testing::LocalParams> store_;
  ParamRefs params_;
  GradRefs grads_;
};

TEST_F(TrainStepChecks, AcceptsAConsistentStep) {
  EXPECT_TRUE(model_->TrainStep(batch_, plan_, params_, &grads_).ok());
}

TEST_F(TrainStepChecks, RejectsABatchOfAnotherShape) {
  std::mt19937 rng(2);
  Batch other = testing::RandomBatch(10, 4, 3, 2, 5, rng);
  EXPECT_EQ(model_->TrainStep(other, plan_, params_, &grads_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainStepChecks, RejectsAPlanOfAnotherBatch) {
  std::mt19937 rng(3);
  Batch other = testing::RandomBatch(10, 3, 3, 3, 50, rng);
  EXPECT_EQ(model_->TrainStep(other, plan_, params_, &grads_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainStepChecks, RejectsBrokenOffsets) {
  batch_.offsets[1][4] = batch_.offsets[1][5] + 1;
  EXPECT_EQ(model_->TrainStep(batch_, plan_, params_, &grads_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainStepChecks, RejectsMissingBindings) {
  ParamRefs short_params = params_;
  short_params.tables.pop_back();
  EXPECT_EQ(model_->TrainStep(batch_, plan_, short_params, &grads_).status().code(),
            absl::StatusCode::kInvalidArgument);
  ParamRefs null_params = params_;
  null_params.tables[0] = nullptr;
  EXPECT_EQ(model_->TrainStep(batch_, plan_, null_params, &grads_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->TrainStep(batch_, plan_, params_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainStepChecks, PredictRejectsTooSmallOutput) {
  std::vector<float> probs(9);
  EXPECT_EQ(model_->Predict(batch_, plan_, params_, probs).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::worker
