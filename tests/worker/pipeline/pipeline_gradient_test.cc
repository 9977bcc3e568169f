// A pipelined step writes the gradients of the unsplit model: P = 1, 2, 3
// stages, M = 1, 4, 7 micro-batches, GPipe and 1F1B, for dlrm, deep_tower,
// dcn_v2 and a model file with DIN's attention (pipeline mode runs the
// network's graph below its tower on stage 0); and the schedules keep the
// activations they promise.
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "model/graph/model_graph.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"
#include "tests/worker/pipeline/stage_harness.h"

namespace pstrain::worker {
namespace {

using testing::LocalParams;
using testing::RandomBatch;
using testing::RelativeError;
using testing::StageHarness;

// A model file pipeline mode cuts: DIN's attention over C3 (C2's ids, one
// table), C3 mean-pooled, columns of unequal widths, and a tower of 4
// layers fed by three tensors.
constexpr const char* kDinFile = R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "C3", "input": "C2", "widths": [5]},
    {"name": "mean", "type": "pool", "sequence": "C3", "pooling": "mean"},
    {"name": "b", "type": "mlp", "input": "dense", "widths": [4], "relu_last": true},
    {"name": "tower", "type": "mlp", "inputs": ["din", "mean", "b", "C1"], "widths": [8, 6, 5, 1]}],
    "heads": [{"input": "tower"}]})";

ModelOptions SmallOptions(const std::string& name) {
  ModelOptions o = testing::TinyOptions(name == "din_file" ? "dlrm" : name);
  o.top_mlp = {8, 6, 5};   // dlrm tower: 4 layers with the logit
  o.deep_mlp = {7, 6, 5};  // deep_tower tower: 4 layers with the logit
  if (name == "din_file") {
    absl::StatusOr<graph::ModelGraph> g = graph::ParseModelGraph(kDinFile, "din.json");
    EXPECT_TRUE(g.ok()) << g.status();
    o.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
    o.field_ids_of = {-1, -1, 1};
    o.field_dims = {3, 4, 4};
    o.pooling = {BagPooling::kMean, BagPooling::kSum, BagPooling::kSum};
  }
  return o;
}

using Param = std::tuple<std::string, int, int, PipeSchedule>;

class PipelineGradientTest : public ::testing::TestWithParam<Param> {};

TEST_P(PipelineGradientTest, PushedGradientsEqualTheUnsplitModel) {
  const auto& [name, stages, microbatches, schedule] = GetParam();
  const ModelOptions options = SmallOptions(name);
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(11);
  const int rows = 23;  // not a multiple of M: micro-batches of unequal size
  auto batch = std::make_shared<const Batch>(RandomBatch(rows, 3, 3, 3, 5, rng));
  BatchPlan plan;
  model.Plan(*batch, &plan);
  LocalParams store(model, 0.5f);
  ParamRefs params;
  GradRefs ref_grads;
  store.Bind(plan, &params, &ref_grads);
  auto ref = model.TrainStep(*batch, plan, params, &ref_grads);
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::vector<std::vector<float>> reference;
  for (const TableSpec& t : model.tables()) reference.push_back(store.grad(t.id));

  StageHarness harness(options, model, stages, microbatches, schedule, rows);
  for (int step = 0; step < 2; ++step) {  // a second step reuses every buffer
    auto result = harness.RunStep(step, batch, plan, params, reference);
    for (int k = 0; k < stages; ++k) ASSERT_TRUE(result.status[k].ok()) << result.status[k];
    // Every table is written by exactly one stage, and equals the reference.
    for (const TableSpec& t : model.tables()) {
      int writer = -1;
      for (int k = 0; k < stages; ++k) {
        const auto& g = result.grads[k][t.id];
        const bool written = !g.empty() && !std::isnan(g[0]);
        if (!written) continue;
        EXPECT_EQ(writer, -1) << t.name << " written by stages " << writer << " and " << k;
        writer = k;
        EXPECT_LT(RelativeError(g, reference[t.id]), 1e-5) << t.name << " on stage " << k;
        for (float v : g) ASSERT_TRUE(std::isfinite(v)) << t.name << " partly written";
      }
      EXPECT_NE(writer, -1) << t.name << " written by no stage";
      if (t.kind == TableKind::kSparse) {
        EXPECT_EQ(writer, 0) << t.name;
      }
    }
    const int mbs = std::min(microbatches, rows);
    EXPECT_NEAR(result.stats[0].loss_sum, ref->loss_sum, 1e-4 * std::abs(ref->loss_sum));
    EXPECT_NEAR(result.stats[stages - 1].loss_sum, ref->loss_sum, 1e-4 * std::abs(ref->loss_sum));
    EXPECT_EQ(result.stats[0].microbatches, mbs);
    ASSERT_EQ(result.stats[0].reports.size(), static_cast<size_t>(stages));
    for (int k = 0; k < stages; ++k) {
      EXPECT_EQ(result.stats[0].reports[k].stage, k);
      EXPECT_EQ(result.stats[0].reports[k].forward_seconds.size(), static_cast<size_t>(mbs));
      EXPECT_EQ(harness.runner(k).live_microbatches(), 0);
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [name, stages, microbatches, schedule] = info.param;
  return name + "_P" + std::to_string(stages) + "_M" + std::to_string(microbatches) + "_" +
         ScheduleName(schedule);
}

INSTANTIATE_TEST_SUITE_P(AllShapes, PipelineGradientTest,
                         ::testing::Combine(::testing::Values("dlrm", "deep_tower", "dcn_v2",
                                                              "din_file"),
                                            ::testing::Values(1, 2, 3), ::testing::Values(1, 4, 7),
                                            ::testing::Values(PipeSchedule::kGpipe,
                                                              PipeSchedule::k1F1B)),
                         ParamName);

// Runs one step of deep_tower on `stages` stages and returns each stage's
// most micro-batches held at once.
std::vector<int> PeakLive(int stages, int microbatches, PipeSchedule schedule) {
  const ModelOptions options = SmallOptions("deep_tower");
  auto model = CreateModel(options);
  EXPECT_TRUE(model.ok());
  std::mt19937 rng(5);
  auto batch = std::make_shared<const Batch>(RandomBatch(32, 3, 3, 2, 5, rng));
  BatchPlan plan;
  (*model)->Plan(*batch, &plan);
  LocalParams store(**model, 0.5f);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  std::vector<std::vector<float>> shapes;
  for (const TableSpec& t : (*model)->tables()) shapes.push_back(store.grad(t.id));
  StageHarness harness(options, **model, stages, microbatches, schedule, 32);
  auto result = harness.RunStep(0, batch, plan, params, shapes);
  std::vector<int> peak;
  for (int k = 0; k < stages; ++k) {
    EXPECT_TRUE(result.status[k].ok()) << result.status[k];
    peak.push_back(harness.runner(k).max_live_microbatches());
  }
  return peak;
}

TEST(PipelineMemory, OneFOneBKeepsAtMostPMicrobatchesPerStage) {
  const int stages = 3, microbatches = 8;
  std::vector<int> peak = PeakLive(stages, microbatches, PipeSchedule::k1F1B);
  for (int k = 0; k < stages; ++k) {
    EXPECT_LE(peak[k], stages) << "stage " << k;
    EXPECT_EQ(peak[k], stages - k) << "stage " << k;  // warm-up depth + 1
  }
}

TEST(PipelineMemory, GpipeKeepsEveryMicrobatch) {
  const int stages = 3, microbatches = 8;
  std::vector<int> peak = PeakLive(stages, microbatches, PipeSchedule::kGpipe);
  for (int k = 0; k < stages; ++k) EXPECT_EQ(peak[k], microbatches) << "stage " << k;
}

}  // namespace
}  // namespace pstrain::worker
