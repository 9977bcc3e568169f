// A model file's network trains: its gradients match finite differences
// with every layer in one graph, and the built-in networks written as files
// compute what --model=NAME computes (the graph of its shape flags).
#include "model/graph/graph_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
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
  EXPECT_EQ(dense, (std::vector<std::string>{"bst.position:8", "bst.wq:16", "bst.wk:16",
                                             "bst.wv:16", "bst.wo:16"}));
  testing::ExpectStepGradientsMatchFiniteDifferences(o, 1e-3, 0.2);
}

// BST's full block: layer norm after each residual and a feed-forward
// block, over C3's items beside the plain layer.
TEST(GraphModel, SelfAttentionFullBlockMatchesFiniteDifferences) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C3", "heads": 2, "max_length": 3,
     "feed_forward": 6, "layer_norm": true},
    {"name": "ffn", "type": "self_attention", "sequence": "C3", "feed_forward": 5},
    {"name": "top", "type": "mlp", "inputs": ["bst", "ffn", "C1", "C2", "dense"], "widths": [6, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> tables;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.name.rfind("bst.", 0) == 0) tables.push_back(absl::StrCat(t.name, ":", t.size));
  }
  EXPECT_EQ(tables, (std::vector<std::string>{
                        "bst.position:12", "bst.wq:16", "bst.wk:16", "bst.wv:16", "bst.wo:16",
                        "bst.ln1.gain:4", "bst.ln1.bias:4", "bst.ff.0.weight:24", "bst.ff.0.bias:6",
                        "bst.ff.1.weight:24", "bst.ff.1.bias:4", "bst.ln2.gain:4", "bst.ln2.bias:4"}));
  testing::ExpectStepGradientsMatchFiniteDifferences(o, 1e-3, 0.2);
}

// BST with the candidate in the sequence: C2's row (and, in a second layer,
// an MLP's output over it) appended to each row's C3 items as the most
// recent; its gradient reaches C2's rows and the MLP through the input.
TEST(GraphModel, SelfAttentionWithATargetMatchesFiniteDifferences) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C3", "input": "C2", "heads": 2,
     "max_length": 3},
    {"name": "t", "type": "mlp", "inputs": ["C2", "dense"], "widths": [4]},
    {"name": "full", "type": "self_attention", "sequence": "C3", "input": "t", "feed_forward": 5,
     "layer_norm": true},
    {"name": "top", "type": "mlp", "inputs": ["bst", "full", "C1", "dense"], "widths": [6, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  testing::ExpectStepGradientsMatchFiniteDifferences(o, 1e-3, 0.2);
}

// A row whose sequence is empty still sees its candidate: three rows equal
// but for their candidate (C2, read nowhere else) and with no history score
// three different probabilities.
TEST(GraphModel, SelfAttentionTargetReachesRowsWithoutHistory) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C3", "heads": 2, "input": "C2"},
    {"name": "top", "type": "mlp", "inputs": ["bst", "C1", "dense"], "widths": [3, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  Batch batch;
  batch.size = 3;
  batch.num_dense = 3;
  batch.num_sparse = 3;
  batch.labels = {0, 1, 0};
  batch.dense = {0.5f, 1, 1.5f, 0.5f, 1, 1.5f, 0.5f, 1, 1.5f};
  batch.ids = {{7, 7, 7}, {11, 12, 13}, {}};  // C1 equal, C2 the candidates, C3 empty
  batch.offsets = {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 0, 0, 0}};
  LocalStep step(**model, batch, 0.5f);
  std::vector<float> probs(3);
  ASSERT_TRUE((*model)->Predict(batch, step.plan, step.params, probs).ok());
  EXPECT_NE(probs[0], probs[1]);
  EXPECT_NE(probs[1], probs[2]);
  EXPECT_NE(probs[0], probs[2]);
}

TEST(GraphModel, PredictAgreesWithTrainStepLoss) {
  testing::ExpectPredictAgreesWithTrainStepLoss(WithGraph(kEveryLayer), 300);  // over chunks
}

// Each embedding table may start its own way (table_init), over the file's
// embedding_init.
TEST(GraphModel, TableInitSetsEachEmbeddingTablesStart) {
  auto model = CreateModel(WithGraph(R"({"embedding_init": {"uniform": 0.05},
    "table_init": {"emb.C1": {"normal": 0.5}, "emb.C2": "zeros"},
    "layers": [{"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}],
    "heads": [{"input": "top"}]})"));
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, std::pair<InitKind, float>> init;
  for (const TableSpec& t : (*model)->tables()) init[t.name] = {t.init.kind, t.init.scale};
  EXPECT_EQ(init["emb.C1"], std::make_pair(InitKind::kNormal, 0.5f));
  EXPECT_EQ(init["emb.C2"].first, InitKind::kZeros);
  EXPECT_EQ(init["emb.C3"], std::make_pair(InitKind::kUniform, 0.05f));
}

// {"uniform": "sqrt(1/rows)"} is TorchRec's default: U(+-sqrt(1/rows)) by
// each column's hash buckets; a column of unbounded ids has no rows to
// scale by and is refused, naming its table. Without a file's own, the
// rows start as the job's --embedding_init says.
TEST(GraphModel, RowsScaledInitUsesEachTablesHashBuckets) {
  ModelOptions o = WithGraph(R"json({"embedding_init": {"uniform": "sqrt(1/rows)"},
    "table_init": {"emb.C3": {"uniform": "1/sqrt(dim)"}},
    "layers": [{"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}],
    "heads": [{"input": "top"}]})json");
  o.field_rows = {100, 0, 0};
  o.field_dims = {16, 16, 4};
  absl::StatusOr<std::unique_ptr<Model>> refused = CreateModel(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("table emb.C2: uniform:sqrt(1/rows) needs the table's rows, and its ids "
                        "are unbounded: give its column hash_buckets"));
  o.field_rows = {100, 10000, 0};
  auto model = CreateModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, std::pair<InitKind, float>> init;
  for (const TableSpec& t : (*model)->tables()) init[t.name] = {t.init.kind, t.init.scale};
  EXPECT_EQ(init["emb.C1"], std::make_pair(InitKind::kUniform, 0.1f));
  EXPECT_EQ(init["emb.C2"], std::make_pair(InitKind::kUniform, 0.01f));
  EXPECT_EQ(init["emb.C3"], std::make_pair(InitKind::kUniform, 0.5f));  // 1/sqrt(4)

  ModelOptions plain = WithGraph(R"({"layers": [
    {"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}], "heads": [{"input": "top"}]})");
  plain.embedding_init = ParseEmbeddingInit("normal:0.02").value();
  auto flagged = CreateModel(plain);
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  for (const TableSpec& t : (*flagged)->tables()) {
    if (t.kind == TableKind::kSparse) {
      EXPECT_EQ(t.init.kind, InitKind::kNormal) << t.name;
      EXPECT_EQ(t.init.scale, 0.02f) << t.name;
    }
  }
}

// A pool layer sums (or averages) a sequence's items: the sum is the
// column's own (sum-pooled) input, bit for bit; the mean trains.
TEST(GraphModel, PoolIsTheColumnsBagAndTheMeanMatchesFiniteDifferences) {
  const auto step = [](const std::string& file) {
    auto model = CreateModel(WithGraph(file));
    EXPECT_TRUE(model.ok()) << model.status();
    std::mt19937 rng(5);
    Batch batch = RandomBatch(50, 3, 3, 4, 30, rng);
    LocalStep s(**model, batch, 0.5f);
    auto out = (*model)->TrainStep(batch, s.plan, s.params, &s.grads);
    EXPECT_TRUE(out.ok()) << out.status();
    return std::make_pair(out.ok() ? out->loss_sum : 0.0, s.store.grad((*model)->tables().back().id));
  };
  const auto own = step(R"({"layers": [
    {"name": "top", "type": "mlp", "inputs": ["C3", "C1", "C2", "dense"], "widths": [5, 1]}],
    "heads": [{"input": "top"}]})");
  const auto pooled = step(R"({"layers": [
    {"name": "pooled", "type": "pool", "sequence": "C3", "pooling": "sum"},
    {"name": "top", "type": "mlp", "inputs": ["pooled", "C1", "C2", "dense"], "widths": [5, 1]}],
    "heads": [{"input": "top"}]})");
  EXPECT_EQ(own.first, pooled.first);
  EXPECT_EQ(own.second, pooled.second) << "emb.C3's gradient";
  testing::ExpectStepGradientsMatchFiniteDifferences(WithGraph(R"({"layers": [
    {"name": "pooled", "type": "pool", "sequence": "C3", "pooling": "mean"},
    {"name": "top", "type": "mlp", "inputs": ["pooled", "C1", "C2", "dense"], "widths": [5, 1]}],
    "heads": [{"input": "top"}]})"));
}

// MMoE with three heads: a click head, a conversion head whose label is
// missing on some rows (masked) with weight 0.5, and a regression head.
constexpr const char* kMmoe = R"({"layers": [
    {"name": "x", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "shared", "type": "experts", "input": "x", "count": 3, "widths": [5, 4]},
    {"name": "own", "type": "experts", "input": "dense", "count": 1, "widths": [4]},
    {"name": "g1", "type": "gate", "input": "x", "experts": ["shared"]},
    {"name": "g2", "type": "gate", "inputs": ["dense", "C1"], "experts": ["shared", "own"]},
    {"name": "t1", "type": "mlp", "input": "g1", "widths": [5, 1]},
    {"name": "t2", "type": "mlp", "input": "g2", "widths": [3, 1]},
    {"name": "t3", "type": "linear", "input": "g2"}],
  "heads": [{"name": "ctr", "input": "t1"},
            {"name": "cvr", "input": "t2", "label": "bought", "weight": 0.5},
            {"name": "spend", "input": "t3", "label": "spent", "loss": "mse", "weight": 2}]})";

ModelOptions MmoeOptions() {
  ModelOptions o = WithGraph(kMmoe, "mmoe.json");
  o.label_names = {"clicked", "bought", "spent"};
  return o;
}

TEST(GraphModel, MmoeWithThreeHeadsMatchesFiniteDifferences) {
  auto model = CreateModel(MmoeOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->heads().size(), 3u);
  EXPECT_EQ((*model)->heads()[1].name, "cvr");
  EXPECT_EQ((*model)->heads()[1].label, 1);
  EXPECT_TRUE((*model)->heads()[2].regression);
  std::vector<std::string> tables;
  for (const TableSpec& t : (*model)->tables()) {
    if (t.name.rfind("g2.", 0) == 0 || t.name.rfind("shared.2", 0) == 0) tables.push_back(t.name);
  }
  EXPECT_EQ(tables, (std::vector<std::string>{"shared.2.0.weight", "shared.2.0.bias", "shared.2.1.weight",
                                              "shared.2.1.bias", "g2.0.weight", "g2.0.bias"}));
  testing::ExpectStepGradientsMatchFiniteDifferences(MmoeOptions(), 1e-3, 0.2, /*extra_labels=*/2);
}

// Predict gives every head's output, [rows x heads], and the step's loss is
// their weighted losses over the rows that have each label.
TEST(GraphModel, PredictGivesEveryHeadAndTheLossMasksMissingLabels) {
  auto model_or = CreateModel(MmoeOptions());
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(4);
  Batch batch = RandomBatch(300, 3, 3, 2, 50, rng);  // over chunks
  testing::AddExtraLabels(&batch, 2, rng);
  LocalStep step(model, batch, 0.5f);
  auto out = model.TrainStep(batch, step.plan, step.params, &step.grads);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> probs(batch.size * 3);
  ASSERT_TRUE(model.Predict(batch, step.plan, step.params, probs).ok());
  std::vector<double> head_loss(3, 0);
  std::vector<int64_t> rows(3, 0);
  for (int r = 0; r < batch.size; ++r) {
    for (int h = 0; h < 3; ++h) {
      const float y = LabelOf(batch, h, r);
      const float p = probs[r * 3 + h];
      if (std::isnan(y)) continue;
      ++rows[h];
      head_loss[h] += h == 2 ? (p - y) * (p - y) : -(y == 1.0f ? std::log(p) : std::log(1.0 - p));
    }
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{300, 200, 300}));  // every third bought is missing
  EXPECT_EQ(out->head_rows, rows);
  for (int h = 0; h < 3; ++h) EXPECT_NEAR(out->head_loss_sum[h], head_loss[h], 1e-4 * head_loss[h]);
  EXPECT_NEAR(out->loss_sum, head_loss[0] + 0.5 * head_loss[1] + 2 * head_loss[2], 1e-4 * out->loss_sum);
  // A buffer for one head is refused, not overrun.
  std::vector<float> one(batch.size);
  EXPECT_FALSE(model.Predict(batch, step.plan, step.params, one).ok());
  // A batch without the heads' labels is refused naming the head.
  Batch plain = RandomBatch(10, 3, 3, 2, 50, rng);
  LocalStep plain_step(model, plain, 0.5f);
  auto refused = model.TrainStep(plain, plain_step.plan, plain_step.params, &plain_step.grads);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("head \"cvr\""));
}

// ESMM: a click head and a conversion head conditioned on it ("times"):
// the second's probability is pCTR x pCVR, learned on every row that has a
// click label (0 where there was no click, else the conversion label).
ModelOptions EsmmOptions() {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "x", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "ctr", "type": "mlp", "input": "x", "widths": [5, 1]},
    {"name": "cvr", "type": "mlp", "input": "x", "widths": [4, 1]}],
    "heads": [{"name": "click", "input": "ctr"},
              {"name": "click_buy", "input": "cvr", "label": "bought", "times": "click", "weight": 0.5}]})",
                             "esmm.json");
  o.label_names = {"clicked", "bought", "spent"};
  return o;
}

TEST(GraphModel, EsmmConditionedHeadMatchesFiniteDifferences) {
  auto model = CreateModel(EsmmOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->heads().size(), 2u);
  EXPECT_EQ((*model)->heads()[0].times, -1);
  EXPECT_EQ((*model)->heads()[1].times, 0);
  testing::ExpectStepGradientsMatchFiniteDifferences(EsmmOptions(), 1e-3, 0.2, /*extra_labels=*/2);
}

TEST(GraphModel, EsmmHeadIsTheProductAndLearnsWhereTheClickLabelIs) {
  auto model_or = CreateModel(EsmmOptions());
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(5);
  Batch batch = RandomBatch(300, 3, 3, 2, 50, rng);  // over chunks
  testing::AddExtraLabels(&batch, 2, rng);
  LocalStep step(model, batch, 0.5f);
  std::vector<float> probs(batch.size * 2);
  ASSERT_TRUE(model.Predict(batch, step.plan, step.params, probs).ok());
  auto out = model.TrainStep(batch, step.plan, step.params, &step.grads);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> head_loss(2, 0);
  std::vector<int64_t> rows(2, 0);
  int64_t unclicked_unlabelled = 0;
  for (int r = 0; r < batch.size; ++r) {
    const float click = LabelOf(batch, 0, r), bought = LabelOf(batch, 1, r);
    EXPECT_LE(probs[r * 2 + 1], probs[r * 2]) << "pCTCVR = pCTR x pCVR, row " << r;
    EXPECT_GT(probs[r * 2 + 1], 0.0f);
    const float y1 = click == 0.0f ? 0.0f : bought;  // no conversion without a click
    if (click == 0.0f && std::isnan(bought)) ++unclicked_unlabelled;
    for (int h = 0; h < 2; ++h) {
      const float y = h == 0 ? click : y1;
      if (std::isnan(y)) continue;
      const double p = probs[r * 2 + h];
      ++rows[h];
      head_loss[h] += -(y == 1.0f ? std::log(p) : std::log(1.0 - p));
    }
  }
  EXPECT_GT(unclicked_unlabelled, 0) << "the batch has rows the rule labels 0";
  EXPECT_EQ(out->head_rows, rows);
  for (int h = 0; h < 2; ++h) EXPECT_NEAR(out->head_loss_sum[h], head_loss[h], 1e-4 * head_loss[h]);
  EXPECT_NEAR(out->loss_sum, head_loss[0] + 0.5 * head_loss[1], 1e-4 * out->loss_sum);
}

// The built-in network `name` (TinyOptions) and the same network as a
// model file: the same tables in the same order, and one step's loss and
// every gradient equal bit for bit.
// `tolerance` > 0: relative, for a file that sums the logit's parts in
// another order (float addition is not associative).
void ExpectSameAsBuiltIn(const std::string& name, const std::string& file, float dropout = 0,
                         double tolerance = 0) {
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
  if (tolerance == 0) {
    EXPECT_EQ(oa->loss_sum, ob->loss_sum);
    for (const TableSpec& t : (*a)->tables()) {
      EXPECT_EQ(sa.store.grad(t.id), sb.store.grad(t.id)) << t.name;
    }
    return;
  }
  EXPECT_NEAR(oa->loss_sum, ob->loss_sum, tolerance * oa->loss_sum);
  for (const TableSpec& t : (*a)->tables()) {
    const std::vector<float>& x = sa.store.grad(t.id);
    const std::vector<float>& y = sb.store.grad(t.id);
    ASSERT_EQ(x.size(), y.size()) << t.name;
    float scale = 1e-6f;
    for (float v : x) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < x.size(); ++k) {
      ASSERT_NEAR(x[k], y[k], tolerance * scale) << t.name << "[" << k << "]";
    }
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

TEST(GraphModel, TheDeepTowerFileIsTheBuiltInDeepTower) {
  ExpectSameAsBuiltIn("deep_tower", R"({"layers": [
    {"name": "tower", "type": "mlp", "inputs": ["embeddings", "dense"], "widths": [6, 4, 1],
     "init": "he"}],
    "heads": [{"input": "tower"}]})");
}

TEST(GraphModel, TheLrFileIsTheBuiltInLr) {
  ExpectSameAsBuiltIn("lr", R"({"layers": [{"name": "lr", "type": "wide", "input": "dense", "bias": true}],
    "heads": [{"input": "lr"}]})");
}

TEST(GraphModel, TheWideDeepAndDeepFmFilesAreTheBuiltInOnes) {
  // TinyOptions: deep_mlp {6, 4} and the logit.
  ExpectSameAsBuiltIn("wide_deep", R"({"layers": [
    {"name": "deep", "type": "mlp", "inputs": ["embeddings", "dense"], "widths": [6, 4, 1], "tower": true},
    {"name": "wide", "type": "wide"},
    {"name": "logit", "type": "add", "inputs": ["deep", "wide"]}],
    "heads": [{"input": "logit"}]})", 0.2f);
  ExpectSameAsBuiltIn("deepfm", R"({"embedding_init": {"uniform": 0.01}, "layers": [
    {"name": "deep", "type": "mlp", "inputs": ["embeddings", "dense"], "widths": [6, 4, 1], "tower": true},
    {"name": "wide", "type": "wide"},
    {"name": "fm", "type": "fm", "inputs": ["embeddings"]},
    {"name": "logit", "type": "add", "inputs": ["deep", "fm", "wide"]}],
    "heads": [{"input": "logit"}]})", 0.2f);
  // Summed in another order: the same up to float rounding.
  ExpectSameAsBuiltIn("wide_deep", R"({"layers": [
    {"name": "deep", "type": "mlp", "inputs": ["embeddings", "dense"], "widths": [6, 4, 1], "tower": true},
    {"name": "wide", "type": "wide"},
    {"name": "logit", "type": "add", "inputs": ["wide", "deep"]}],
    "heads": [{"input": "logit"}]})", 0.2f, 1e-5);
}

TEST(GraphModel, WideAndAddMatchFiniteDifferences) {
  testing::ExpectStepGradientsMatchFiniteDifferences(WithGraph(R"({"layers": [
    {"name": "b", "type": "mlp", "input": "dense", "widths": [4], "relu_last": true},
    {"name": "w", "type": "wide", "input": "b", "columns": ["C1", "C3"], "bias": true},
    {"name": "v", "type": "wide", "columns": ["C2"]},
    {"name": "t", "type": "linear", "inputs": ["b", "embeddings"]},
    {"name": "logit", "type": "add", "inputs": ["w", "v", "t"]}],
    "heads": [{"input": "logit"}]})"), 1e-3, 0.2);
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
