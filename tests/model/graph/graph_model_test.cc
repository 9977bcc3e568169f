// A model file's network trains like the built-in ones: its gradients match
// finite differences with every layer in one graph, and the built-in
// networks written as files compute the built-in classes' numbers.
#include "model/graph/graph_model.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/graph/model_graph.h"
#include "model/models/model.h"
#include "tests/model/models/model_grad_check.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

using testing::LocalStep;
using testing::RandomBatch;
using testing::TinyOptions;

// TinyOptions (3 dense columns, C1..C3 of width 4) with the graph of `text`.
ModelOptions WithGraph(const std::string& text, const std::string& name = "m.json") {
  ModelOptions o = TinyOptions("dlrm");
  absl::StatusOr<graph::ModelGraph> g = graph::ParseModelGraph(text, name);
  EXPECT_TRUE(g.ok()) << g.status();
  if (g.ok()) o.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
  return o;
}

// Every layer type; "b" and each embedding are read by several layers (their
// gradients are summed), "dense" by two, "i" lives in its reader's block.
constexpr const char* kEveryLayer = R"({
  "layers": [
    {"name": "b", "type": "mlp", "input": "dense", "widths": [5, 4], "relu_last": true},
    {"name": "i", "type": "dot_interaction", "inputs": ["b", "embeddings"]},
    {"name": "x", "type": "cross", "inputs": ["b", "embeddings"], "layers": 2, "rank": 3},
    {"name": "f", "type": "fm", "inputs": ["embeddings"]},
    {"name": "w", "type": "linear", "input": "dense"},
    {"name": "cat", "type": "concat", "inputs": ["x", "f", "w"]},
    {"name": "top", "type": "mlp", "inputs": ["i", "cat", "dense"], "widths": [6, 1]}
  ],
  "heads": [{"name": "click", "input": "top"}]
})";

TEST(GraphModel, EveryLayerTypeGradientsMatchFiniteDifferences) {
  // A step of 1e-3: the graph stacks ReLU layers and products (interaction,
  // cross, FM), and a step of 1e-2 crosses too many kinks; one of top's 6
  // biases sits on a kink for a row of this batch.
  testing::ExpectStepGradientsMatchFiniteDifferences(WithGraph(kEveryLayer), 1e-3, 0.2);
}

TEST(GraphModel, MeanPooledAndUnequalWidthsMatchFiniteDifferences) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "cat", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "x", "type": "cross", "input": "cat", "layers": 1},
    {"name": "top", "type": "mlp", "inputs": ["x", "C2"], "widths": [4, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_dims = {2, 4, 7};
  o.pooling = {BagPooling::kMean, BagPooling::kSum, BagPooling::kMean};
  testing::ExpectStepGradientsMatchFiniteDifferences(o);
}

// DIN: C3 is a history whose ids are C2's (one table), attended against C2.
TEST(GraphModel, TargetAttentionOverASharedTableMatchesFiniteDifferences) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "C3", "input": "C2", "widths": [5]},
    {"name": "top", "type": "mlp", "inputs": ["din", "C1", "C2", "dense"], "widths": [6, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> sparse;
  for (uint32_t t : (*model)->sparse_tables()) sparse.push_back((*model)->tables()[t].name);
  EXPECT_EQ(sparse, (std::vector<std::string>{"emb.C1", "emb.C2"})) << "C3 looks up C2's table";
  testing::ExpectStepGradientsMatchFiniteDifferences(o, 1e-3, 0.2);
}

// BST: one self-attention layer over C3's items (2 heads of 2; positions
// past the second share it), beside DIN's attention over a shared table.
TEST(GraphModel, SelfAttentionMatchesFiniteDifferences) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C3", "heads": 2, "max_length": 2},
    {"name": "din", "type": "target_attention", "sequence": "C3", "input": "C2", "widths": [3]},
    {"name": "top", "type": "mlp", "inputs": ["bst", "din", "C1", "C2", "dense"], "widths": [6, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> dense;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.name.rfind("bst.", 0) == 0) dense.push_back(absl::StrCat(t.name, ":", t.size));
  }
  EXPECT_EQ(dense, (std::vector<std::string>{"bst.position:8", "bst.q:16", "bst.k:16", "bst.v:16",
                                             "bst.o:16"}));
  testing::ExpectStepGradientsMatchFiniteDifferences(o, 1e-3, 0.2);
}

TEST(GraphModel, PredictAgreesWithTrainStepLoss) {
  testing::ExpectPredictAgreesWithTrainStepLoss(WithGraph(kEveryLayer), 300);  // over chunks
}

// The built-in network `name` (TinyOptions) and the same network as a
// model file: the same tables in the same order, and one step's loss and
// every gradient equal bit for bit.
void ExpectSameAsBuiltIn(const std::string& name, const std::string& file, float dropout = 0) {
  ModelOptions builtin = TinyOptions(name);
  builtin.dropout = dropout;
  ModelOptions graph = WithGraph(file, name + ".json");
  graph.dropout = dropout;
  auto a = CreateModel(builtin);
  auto b = CreateModel(graph);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*a)->tables().size(), (*b)->tables().size());
  for (size_t t = 0; t < (*a)->tables().size(); ++t) {
    const TableSpec& x = (*a)->tables()[t];
    const TableSpec& y = (*b)->tables()[t];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.size, y.size) << x.name;
    EXPECT_EQ(x.dim, y.dim) << x.name;
    EXPECT_EQ(x.init.kind, y.init.kind) << x.name;
    EXPECT_EQ(x.init.scale, y.init.scale) << x.name;
  }
  std::mt19937 rng(9);
  Batch batch = RandomBatch(300, 3, 3, 3, 40, rng);
  LocalStep sa(**a, batch, 0.0f), sb(**b, batch, 0.0f);
  auto oa = (*a)->TrainStep(batch, sa.plan, sa.params, &sa.grads);
  auto ob = (*b)->TrainStep(batch, sb.plan, sb.params, &sb.grads);
  ASSERT_TRUE(oa.ok()) << oa.status();
  ASSERT_TRUE(ob.ok()) << ob.status();
  EXPECT_EQ(oa->loss_sum, ob->loss_sum);
  for (const TableSpec& t : (*a)->tables()) {
    EXPECT_EQ(sa.store.grad(t.id), sb.store.grad(t.id)) << t.name;
  }
}

TEST(GraphModel, TheDlrmFileIsTheBuiltInDlrm) {
  // TinyOptions: bottom_mlp {5, 4}, top_mlp {6, 3} and the logit.
  const std::string dlrm = R"({"layers": [
    {"name": "bottom", "type": "mlp", "input": "dense", "widths": [5, 4], "relu_last": true},
    {"name": "interaction", "type": "dot_interaction", "inputs": ["bottom", "embeddings"]},
    {"name": "top", "type": "mlp", "input": "interaction", "widths": [6, 3, 1], "tower": true}],
    "heads": [{"name": "click", "input": "top"}]})";
  ExpectSameAsBuiltIn("dlrm", dlrm);
  ExpectSameAsBuiltIn("dlrm", dlrm, /*dropout=*/0.3f);
}

TEST(GraphModel, TheDcnV2FileIsTheBuiltInDcnV2) {
  // TinyOptions: cross_layers 2 of rank 3.
  ExpectSameAsBuiltIn("dcn_v2", R"({"layers": [
    {"name": "bottom", "type": "mlp", "input": "dense", "widths": [5, 4], "relu_last": true},
    {"name": "cross", "type": "cross", "inputs": ["bottom", "embeddings"], "layers": 2, "rank": 3},
    {"name": "top", "type": "mlp", "input": "cross", "widths": [6, 3, 1], "tower": true}],
    "heads": [{"name": "click", "input": "top"}]})");
}

TEST(GraphModel, AGraphThatDoesNotFitTheColumnsIsRefusedNamingTheLayer) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "i", "type": "dot_interaction", "inputs": ["dense", "embeddings"]},
    {"name": "top", "type": "linear", "input": "i"}],
    "heads": [{"input": "top"}]})");
  auto model = CreateModel(o);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("m.json:2: layer \"i\" (dot_interaction): its inputs must "
                                          "be of one width"),
            std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace pstrain::worker
