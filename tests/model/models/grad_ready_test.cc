// GradRefs::on_ready: each dense table is reported once, with its final
// gradient already written, and the top of the network first.
#include <gtest/gtest.h>

#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

class GradReadyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradReadyTest, EveryDenseTableIsReportedOnceWithItsFinalGradient) {
  ModelOptions o;
  o.name = GetParam();
  o.num_dense = 5;
  o.num_sparse = 3;
  o.embedding_dim = 4;
  o.bottom_mlp = {8, 4};
  o.top_mlp = {8, 6};
  o.deep_mlp = {8, 6};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(3);
  // More rows than one CPU chunk: reports must wait for the last chunk.
  Batch batch = testing::RandomBatch(600, 5, 3, 2, 20, rng);
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  testing::LocalParams store(**model, 0.2f);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  std::vector<int> reports((*model)->tables().size(), 0);
  std::vector<std::vector<float>> at_report((*model)->tables().size());
  std::vector<uint32_t> order;
  grads.on_ready = [&](uint32_t t) {
    ++reports[t];
    order.push_back(t);
    const TableSpec& spec = (*model)->tables()[t];
    at_report[t].assign(grads.tables[t], grads.tables[t] + spec.size);
  };
  ASSERT_TRUE((*model)->TrainStep(batch, plan, params, &grads).ok());
  for (const TableSpec& t : (*model)->tables()) {
    if (t.kind != TableKind::kDense) {
      EXPECT_EQ(reports[t.id], 0) << t.name;
      continue;
    }
    EXPECT_EQ(reports[t.id], 1) << t.name;
    std::vector<float> final(grads.tables[t.id], grads.tables[t.id] + t.size);
    EXPECT_EQ(at_report[t.id], final) << t.name << " changed after it was reported";
  }
  // Later tables (higher layers) come first when the model has layers.
  if (GetParam() == "dlrm") {
    uint32_t top_last = 0, bottom_first = 0;
    for (const TableSpec& t : (*model)->tables()) {
      if (t.name == "top.2.weight") top_last = t.id;
      if (t.name == "bottom.0.weight") bottom_first = t.id;
    }
    auto pos = [&](uint32_t t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
    EXPECT_LT(pos(top_last), pos(bottom_first));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GradReadyTest, ::testing::Values("dlrm", "wide_deep", "lr", "dcn_v2", "deepfm"));

}  // namespace
}  // namespace pstrain::worker
