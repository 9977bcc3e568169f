// Whole training steps on the CUDA device against the CPU: every built-in
// network and model files with DIN's attention, MMoE's gates and several
// heads; the gradients every model pushes and every head's outputs agree
// within 1e-4 of each tensor's largest element (sums over hundreds of rows
// run in another order). Label gpu; skipped, naming why, without a GPU.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/graph/model_graph.h"
#include "model/models/model.h"
#include "tests/gpu/expect_close.h"
#include "tests/model/models/model_grad_check.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker::nn {
namespace {

class CudaModelTest : public ::testing::TestWithParam<std::string> {};

// One step of the model of `options` on "cuda" and on "cpu": loss, every
// gradient and every head's output agree. `extra_labels`: the batch's
// labels beside the first (for several heads; every third missing).
void ExpectWholeStepMatchesCpu(ModelOptions options, int extra_labels = 0) {
  options.device = "cuda";
  auto gpu = CreateModel(options);
  if (!gpu.ok()) {
    ASSERT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable) << gpu.status();
    GTEST_SKIP() << "no GPU: " << gpu.status();
  }
  options.device = "cpu";
  auto cpu = CreateModel(options);
  ASSERT_TRUE(cpu.ok());
  std::mt19937 rng(9);
  // 600 rows: the CPU computes them in chunks, the GPU at once.
  Batch batch = testing::RandomBatch(600, 13, 26, 2, 300, rng);
  if (extra_labels > 0) testing::AddExtraLabels(&batch, extra_labels, rng);
  BatchPlan plan;
  (*cpu)->Plan(batch, &plan);
  testing::LocalParams cpu_store(**cpu, 0.3f), gpu_store(**gpu, 0.3f);
  ParamRefs cpu_params, gpu_params;
  GradRefs cpu_grads, gpu_grads;
  cpu_store.Bind(plan, &cpu_params, &cpu_grads);
  gpu_store.Bind(plan, &gpu_params, &gpu_grads);
  auto cpu_out = (*cpu)->TrainStep(batch, plan, cpu_params, &cpu_grads);
  auto gpu_out = (*gpu)->TrainStep(batch, plan, gpu_params, &gpu_grads);
  ASSERT_TRUE(cpu_out.ok()) << cpu_out.status();
  ASSERT_TRUE(gpu_out.ok()) << gpu_out.status();
  EXPECT_NEAR(gpu_out->loss_sum, cpu_out->loss_sum, 1e-4 * cpu_out->loss_sum);
  for (const TableSpec& t : (*cpu)->tables()) {
    const std::vector<float>& c = cpu_store.grad(t.id);
    const std::vector<float>& g = gpu_store.grad(t.id);
    ASSERT_EQ(c.size(), g.size()) << t.name;
    float scale = 1.0f;
    for (float v : c) scale = std::max(scale, std::abs(v));
    size_t bad = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!(std::abs(g[i] - c[i]) <= 1e-4f * scale) && ++bad <= 3) {
        ADD_FAILURE() << t.name << "[" << i << "]: gpu " << g[i] << " cpu " << c[i];
      }
    }
    EXPECT_EQ(bad, 0u) << t.name;
  }
  EXPECT_EQ(gpu_out->head_rows, cpu_out->head_rows);
  const size_t outputs = static_cast<size_t>(batch.size) * (*cpu)->heads().size();
  std::vector<float> cpu_probs(outputs), gpu_probs(outputs);
  ASSERT_TRUE((*cpu)->Predict(batch, plan, cpu_params, cpu_probs).ok());
  ASSERT_TRUE((*gpu)->Predict(batch, plan, gpu_params, gpu_probs).ok());
  ExpectClose(gpu_probs, cpu_probs, "probs");
}

TEST_P(CudaModelTest, WholeStepMatchesCpu) {
  ModelOptions options;
  options.name = GetParam();
  // The towers drop the same elements on both devices (one chunk on the GPU,
  // 256-row chunks on the CPU).
  if (options.name != "lr" && options.name != "deep_tower") options.dropout = 0.2f;
  ExpectWholeStepMatchesCpu(options);
}

// A model file's network of `text` over the Criteo layout's columns.
ModelOptions WithGraph(const std::string& text, const std::string& name) {
  ModelOptions options;
  absl::StatusOr<graph::ModelGraph> g = graph::ParseModelGraph(text, name);
  EXPECT_TRUE(g.ok()) << g.status();
  if (g.ok()) options.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
  return options;
}

// A model file's network with the layers of the built-in networks.
TEST(CudaGraphModelTest, EveryLayerStepMatchesCpu) {
  ExpectWholeStepMatchesCpu(WithGraph(R"({"layers": [
    {"name": "b", "type": "mlp", "input": "dense", "widths": [32, 16], "relu_last": true},
    {"name": "i", "type": "dot_interaction", "inputs": ["b", "embeddings"]},
    {"name": "x", "type": "cross", "inputs": ["b", "embeddings"], "layers": 2, "rank": 8},
    {"name": "f", "type": "fm", "inputs": ["embeddings"]},
    {"name": "w", "type": "linear", "input": "dense", "width": 3},
    {"name": "cat", "type": "concat", "inputs": ["x", "f", "w"]},
    {"name": "top", "type": "mlp", "inputs": ["i", "cat", "dense"], "widths": [64, 1], "dropout": 0.2}],
    "heads": [{"input": "top"}]})", "every_layer.json"));
}

// DIN: C26 as a history of C25's items (one table), attended against C25,
// and pooled by mean beside it.
TEST(CudaGraphModelTest, TargetAttentionAndPoolStepMatchesCpu) {
  ModelOptions options = WithGraph(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "C26", "input": "C25", "widths": [36]},
    {"name": "mean", "type": "pool", "sequence": "C26", "pooling": "mean"},
    {"name": "top", "type": "mlp", "inputs": ["din", "mean", "embeddings", "dense"], "widths": [64, 1]}],
    "heads": [{"input": "top"}]})", "din.json");
  options.field_ids_of.assign(26, -1);
  options.field_ids_of[25] = 24;
  ExpectWholeStepMatchesCpu(options);
}

// MMoE with a click head, a conversion head with missing labels and a
// regression head.
TEST(CudaGraphModelTest, MmoeWithThreeHeadsStepMatchesCpu) {
  ModelOptions options = WithGraph(R"({"layers": [
    {"name": "x", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "experts", "type": "experts", "input": "x", "count": 4, "widths": [64, 32]},
    {"name": "g1", "type": "gate", "input": "x", "experts": ["experts"]},
    {"name": "g2", "type": "gate", "input": "x", "experts": ["experts"]},
    {"name": "g3", "type": "gate", "input": "dense", "experts": ["experts"]},
    {"name": "t1", "type": "mlp", "input": "g1", "widths": [16, 1]},
    {"name": "t2", "type": "mlp", "input": "g2", "widths": [16, 1]},
    {"name": "t3", "type": "linear", "input": "g3"}],
    "heads": [{"name": "ctr", "input": "t1"},
              {"name": "cvr", "input": "t2", "label": "bought", "weight": 0.5},
              {"name": "spend", "input": "t3", "label": "spent", "loss": "mse"}]})", "mmoe.json");
  options.label_names = {"clicked", "bought", "spent"};
  ExpectWholeStepMatchesCpu(options, /*extra_labels=*/2);
}

// BST: self-attention over C26 as a history of C25's items (one table),
// two heads, fewer positions than the longest history, beside DIN's
// attention over it.
TEST(CudaGraphModelTest, SelfAttentionStepMatchesCpu) {
  ModelOptions options = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C26", "heads": 2, "max_length": 3,
     "feed_forward": 24, "layer_norm": true},
    {"name": "din", "type": "target_attention", "sequence": "C26", "input": "C25", "widths": [8]},
    {"name": "top", "type": "mlp", "inputs": ["bst", "din", "embeddings", "dense"], "widths": [32, 1]}],
    "heads": [{"input": "top"}]})", "bst.json");
  options.field_ids_of.assign(26, -1);
  options.field_ids_of[25] = 24;
  ExpectWholeStepMatchesCpu(options);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaModelTest, ::testing::Values("dlrm", "wide_deep", "lr", "dcn_v2", "deepfm",
                                                                  "deep_tower"));

}  // namespace
}  // namespace pstrain::worker::nn
