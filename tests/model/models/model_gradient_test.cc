// Whole-model gradient checks: the gradients TrainStep writes for every table
// (dense and sparse rows) match central differences of its loss.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_grad_check.h"
#include "tests/model/models/model_test_util.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker {
namespace {

using testing::LocalStep;
using testing::RandomBatch;
using testing::TinyOptions;

class ModelGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradientTest, StepGradientsMatchFiniteDifferences) {
  testing::ExpectStepGradientsMatchFiniteDifferences(TinyOptions(GetParam()));
}

TEST_P(ModelGradientTest, PredictAgreesWithTrainStepLoss) {
  testing::ExpectPredictAgreesWithTrainStepLoss(TinyOptions(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientTest,
                         ::testing::Values("lr", "wide_deep", "dlrm", "dcn_v2", "deepfm"));

TEST(DcnV2Gradient, FullRankCrossLayersMatchFiniteDifferences) {
  ModelOptions o = TinyOptions("dcn_v2");
  o.cross_rank = 0;
  o.cross_layers = 3;
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  int cross_weights = 0;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.name.rfind("cross.", 0) == 0 && t.name.find(".weight") != std::string::npos) {
      EXPECT_EQ(t.size, 16u * 16u) << t.name;  // x_0: bottom 4 + 3 fields x 4
      ++cross_weights;
    }
  }
  EXPECT_EQ(cross_weights, 3);
  testing::ExpectStepGradientsMatchFiniteDifferences(o);
}

TEST(FieldShapes, DeepFmRefusesUnequalWidthsNamingTheField) {
  ModelOptions o = TinyOptions("deepfm");
  o.field_dims = {4, 4, 3};
  auto model = CreateModel(o);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("C3 is 3"), std::string::npos) << model.status();
}

// A schema's per-column embedding widths and mean pooling (schema_file.h).
class FieldShapeGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FieldShapeGradientTest, PerFieldWidthsAndMeanPoolingMatchFiniteDifferences) {
  ModelOptions o = TinyOptions(GetParam());
  o.field_dims = {2, 4, 7};
  o.pooling = {BagPooling::kMean, BagPooling::kSum, BagPooling::kMean};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  int emb_rows = 0;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.kind == TableKind::kSparse && t.name.rfind("emb.", 0) == 0) {
      EXPECT_EQ(static_cast<int>(t.dim), o.field_dims[emb_rows]) << t.name;
      ++emb_rows;
    }
  }
  EXPECT_EQ(emb_rows, 3);
  testing::ExpectStepGradientsMatchFiniteDifferences(o);
}

INSTANTIATE_TEST_SUITE_P(Models, FieldShapeGradientTest,
                         ::testing::Values("wide_deep", "deep_tower", "dcn_v2"));

TEST(FieldShapes, DlrmRefusesUnequalWidthsNamingTheField) {
  ModelOptions o = TinyOptions("dlrm");
  o.field_dims = {4, 2, 4};
  auto model = CreateModel(o);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("C2 is 2"), std::string::npos) << model.status();
}

}  // namespace
}  // namespace pstrain::worker
