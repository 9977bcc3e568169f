// A model file is read, checked and shaped before anything trains: every
// mistake is one line naming the file, its line, the layer and the key.
#include "model/graph/model_graph.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::worker::graph {
namespace {

using ::testing::HasSubstr;

// The Criteo-like inputs of the tests: 3 dense columns, 3 categorical ones of width 4.
GraphInputs Inputs() {
  GraphInputs in;
  in.num_dense = 3;
  in.columns = {"user", "item", "ad"};
  in.dims = {4, 4, 4};
  return in;
}

constexpr const char* kDlrm = R"({
  // DLRM
  "layers": [
    {"name": "bottom", "type": "mlp", "input": "dense", "widths": [5, 4], "relu_last": true},
    {"name": "interaction", "type": "dot_interaction", "inputs": ["bottom", "embeddings"]},
    {"name": "top", "type": "mlp", "input": "interaction", "widths": [6, 1], "tower": true}
  ],
  "heads": [{"name": "click", "input": "top"}]
})";

// The error of a file that fails to parse or to resolve against Inputs().
std::string Error(const std::string& text) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(text, "m.json");
  if (!g.ok()) return std::string(g.status().message());
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, Inputs());
  if (!r.ok()) return std::string(r.status().message());
  ADD_FAILURE() << "accepted:\n" << text;
  return "";
}

TEST(ModelGraph, DlrmResolvesWithEveryTensorsWidth) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(kDlrm, "dlrm.json");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 3u);
  EXPECT_EQ(g->layers[0].line, 4);
  EXPECT_TRUE(g->layers[2].tower);
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  // dense, 3 embeddings, 3 layers.
  ASSERT_EQ(r->tensors.size(), 7u);
  EXPECT_EQ(r->tensors[r->layer_output[0]].width, 4);
  // The interaction of 4 vectors of 4: the first vector and 6 dot products.
  EXPECT_EQ(r->tensors[r->layer_output[1]].width, 4 + 6);
  EXPECT_EQ(r->InputWidth(1), 16);
  EXPECT_EQ(r->layer_inputs[1].size(), 4u);
  EXPECT_EQ(r->tensors[r->layer_output[2]].width, 1);
  EXPECT_EQ(r->order, (std::vector<int>{0, 1, 2}));
}

TEST(ModelGraph, LayersMayComeInAnyOrder) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(R"({"layers": [
    {"name": "top", "type": "linear", "input": "both"},
    {"name": "both", "type": "concat", "inputs": ["dense", "embeddings"]}],
    "heads": [{"input": "top"}]})", "m.json");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order, (std::vector<int>{1, 0}));
  EXPECT_EQ(r->tensors[r->layer_output[1]].width, 3 + 12);
  EXPECT_EQ(g->heads[0].name, "click");
}

TEST(ModelGraph, EveryBadGraphIsOneLineNamingTheLineLayerAndKey) {
  const auto file = [](const std::string& layers, const std::string& heads = R"([{"input": "top"}])") {
    return "{\"layers\": [\n" + layers + "\n], \"heads\": " + heads + "}";
  };
  const std::string top = R"({"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]})";
  // A cycle.
  EXPECT_THAT(Error(file(R"({"name": "a", "type": "mlp", "input": "b", "widths": [4]},
{"name": "b", "type": "mlp", "inputs": ["a", "dense"], "widths": [4]},
{"name": "top", "type": "linear", "inputs": ["b", "embeddings"]})")),
              HasSubstr("m.json:2: a cycle: layers \"a\", \"b\" read each other"));
  // An unknown layer type, with the closest.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "lineer", "inputs": ["dense", "embeddings"]})")),
              HasSubstr("m.json:2: layer \"top\": unknown type \"lineer\" (did you mean \"linear\"?)"));
  // An unknown key.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear", "inputs": ["dense", "embeddings"], "widht": 1})")),
              HasSubstr("m.json:2: layer \"top\" (linear): unknown key \"widht\" (did you mean \"width\"?)"));
  // An input no layer has.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear", "inputs": ["dense", "embedings"]})")),
              HasSubstr("layer \"top\": no input or layer \"embedings\" (did you mean \"embeddings\"?)"));
  // Unequal widths in a dot interaction.
  EXPECT_THAT(Error(file(R"({"name": "i", "type": "dot_interaction", "inputs": ["dense", "embeddings"]},
{"name": "top", "type": "linear", "input": "i"})")),
              HasSubstr("m.json:2: layer \"i\" (dot_interaction): its inputs must be of one width; "
                        "\"dense\" is 3 wide, \"user\" 4"));
  // A head wider than a logit.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "mlp", "inputs": ["dense", "embeddings"], "widths": [4]})")),
              HasSubstr("head \"click\": \"top\" is 4 wide"));
  // A head read by another layer.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]},
{"name": "more", "type": "linear", "input": "top"})", R"([{"input": "top"}, {"input": "more"}])")),
              HasSubstr("head \"click\": \"top\" is read by another layer"));
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]},
{"name": "more", "type": "linear", "input": "top"})", R"([{"input": "top"}])")),
              HasSubstr("head \"click\": \"top\" is read by another layer"));
  // No head.
  EXPECT_THAT(Error(file(top, "[]")), HasSubstr("no \"heads\""));
  // A head of no layer.
  EXPECT_THAT(Error(file(top, R"([{"name": "ctr", "input": "tpo"}])")),
              HasSubstr("head \"ctr\": no layer \"tpo\" (did you mean \"top\"?)"));
  // An input no layer uses, and a layer no head depends on.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear", "input": "embeddings"})")),
              HasSubstr("the dense columns (\"dense\") feed no layer"));
  EXPECT_THAT(Error(file(top + R"(,
{"name": "spare", "type": "linear", "input": "dense"})")),
              HasSubstr("m.json:3: layer \"spare\": no head depends on it"));
  // Names: taken twice, or an input's.
  EXPECT_THAT(Error(file(top + ",\n" + top)), HasSubstr("m.json:3: layer \"top\": the name is taken by the layer at line 2"));
  EXPECT_THAT(Error(file(R"({"name": "item", "type": "linear", "inputs": ["dense", "embeddings"]})",
                         R"([{"input": "item"}])")),
              HasSubstr("layer \"item\": the name is taken by an input of the schema"));
  // Bad values.
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "mlp", "inputs": ["dense", "embeddings"], "widths": [0, 1]})")),
              HasSubstr("layer \"top\": \"widths\" must be in 1..65536, not 0"));
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "mlp", "inputs": ["dense", "embeddings"]})")),
              HasSubstr("layer \"top\" (mlp) needs \"widths\""));
  EXPECT_THAT(Error(file(R"({"name": "top", "type": "linear"})")), HasSubstr("layer \"top\" needs an \"input\""));
  EXPECT_THAT(Error("{\"layers\": [\n{\"name\": \"top\",, }]}"), HasSubstr("m.json:2: not valid JSON"));
  EXPECT_THAT(Error("{\"layer\": []}"), HasSubstr("m.json:1: unknown key \"layer\" (did you mean \"layers\"?)"));
}

TEST(ModelGraph, TargetAttentionNamesItsSequenceAndTarget) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "ad", "input": "item"},
    {"name": "top", "type": "linear", "inputs": ["din", "dense", "user", "item"]}],
    "heads": [{"input": "top"}]})", "m.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->layers[0].widths, std::vector<int>{36}) << "DIN's attention unit";
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, Inputs());
  ASSERT_TRUE(r.ok()) << r.status() << ": the sequence's column is used";
  EXPECT_EQ(r->layer_sequence[0], 2);
  EXPECT_EQ(r->tensors[r->layer_output[0]].width, 4);
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "add", "input": "item"},
    {"name": "top", "type": "linear", "inputs": ["din", "dense", "user", "item", "ad"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"din\": \"sequence\": no categorical column \"add\" (did you mean \"ad\"?)"));
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "ad", "inputs": ["item", "user"]},
    {"name": "top", "type": "linear", "inputs": ["din", "dense"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("its input (the target) is 8 wide, the items of \"ad\" 4"));
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "din", "type": "target_attention", "input": "item"},
    {"name": "top", "type": "linear", "inputs": ["din", "dense", "embeddings"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("needs a \"sequence\""));
  // Columns sharing a table share a width.
  GraphInputs in = Inputs();
  in.ids_of = {-1, -1, 1};
  in.dims = {4, 4, 8};
  absl::StatusOr<ModelGraph> plain = ParseModelGraph(R"({"layers": [
    {"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}], "heads": [{"input": "top"}]})", "m.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(std::string(ResolveGraph(*plain, in).status().message()),
              HasSubstr("column \"ad\" takes its ids from \"item\" (ids_like) and shares its table, but is 8 wide"));
}

TEST(ModelGraph, SelfAttentionReadsItsSequenceAndAtMostATarget) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "ad", "heads": 2},
    {"name": "top", "type": "linear", "inputs": ["bst", "dense", "user", "item"]}],
    "heads": [{"input": "top"}]})", "m.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->layers[0].max_length, 50);
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors[r->layer_output[0]].width, 4);
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "ad", "heads": 3},
    {"name": "top", "type": "linear", "inputs": ["bst", "dense", "user", "item"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"bst\" (self_attention): 3 heads do not divide the items' width 4"));
  // BST's candidate appended to the sequence: one input, as wide as the items.
  absl::StatusOr<ModelGraph> with_target = ParseModelGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "ad", "input": "item"},
    {"name": "top", "type": "linear", "inputs": ["bst", "dense", "user"]}],
    "heads": [{"input": "top"}]})", "m.json");
  ASSERT_TRUE(with_target.ok()) << with_target.status();
  r = ResolveGraph(*with_target, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors[r->layer_output[0]].width, 4);
  EXPECT_EQ(r->layer_inputs[0].size(), 1u);
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "ad", "inputs": ["item", "user"]},
    {"name": "top", "type": "linear", "inputs": ["bst", "dense"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"bst\" (self_attention) takes one \"input\" at most: the target"));
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "wide_item", "type": "linear", "input": "item", "width": 3},
    {"name": "bst", "type": "self_attention", "sequence": "ad", "input": "wide_item"},
    {"name": "top", "type": "linear", "inputs": ["bst", "dense"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"bst\" (self_attention): its input (the target appended to each "
                        "row's sequence) is 3 wide, the items of \"ad\" 4"));
  EXPECT_THAT(Error(R"({"layers": [
    {"name": "p", "type": "pool", "sequence": "ad", "input": "item"},
    {"name": "top", "type": "linear", "inputs": ["p", "dense"]}],
    "heads": [{"input": "top"}]})"),
              HasSubstr("reads its \"sequence\" only"));
}

// MMoE over the test inputs: two experts, a gate and a tower per task.
constexpr const char* kMmoe = R"({"layers": [
    {"name": "x", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "experts", "type": "experts", "input": "x", "count": 2, "widths": [6, 5]},
    {"name": "gate_click", "type": "gate", "input": "x", "experts": ["experts"]},
    {"name": "gate_buy", "type": "gate", "input": "x", "experts": ["experts"]},
    {"name": "click", "type": "mlp", "input": "gate_click", "widths": [4, 1]},
    {"name": "buy", "type": "mlp", "input": "gate_buy", "widths": [4, 1]},
    {"name": "spend", "type": "linear", "input": "gate_buy"}],
  "heads": [{"name": "ctr", "input": "click"},
            {"name": "cvr", "input": "buy", "label": "bought", "weight": 0.5},
            {"name": "amount", "input": "spend", "label": "spent", "loss": "mse"}]})";

TEST(ModelGraph, SeveralHeadsEachLearnANamedLabel) {
  absl::StatusOr<ModelGraph> g = ParseModelGraph(kMmoe, "mmoe.json");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->heads.size(), 3u);
  EXPECT_EQ(g->heads[1].label, "bought");
  EXPECT_EQ(g->heads[1].weight, 0.5f);
  EXPECT_TRUE(g->heads[2].regression);
  GraphInputs in = Inputs();
  in.labels = {"clicked", "bought", "spent"};
  absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->head_label, (std::vector<int>{0, 1, 2}));
  // The experts side by side; each gate gives one expert's width.
  EXPECT_EQ(r->tensors[r->layer_output[1]].width, 2 * 5);
  EXPECT_EQ(r->tensors[r->layer_output[2]].width, 5);
  // A gate reads its selector, then the experts.
  EXPECT_EQ(r->layer_gate_inputs[2], 1);
  EXPECT_EQ(r->layer_inputs[2].size(), 2u);
  EXPECT_EQ(r->InputWidth(2), 15 + 10);
}

TEST(ModelGraph, BadHeadsAndGatesAreRefusedNamingTheHeadOrLayer) {
  GraphInputs in = Inputs();
  in.labels = {"clicked", "bought"};
  const auto error = [&in](const std::string& text) -> std::string {
    absl::StatusOr<ModelGraph> g = ParseModelGraph(text, "m.json");
    if (!g.ok()) return std::string(g.status().message());
    absl::StatusOr<ResolvedGraph> r = ResolveGraph(*g, in);
    if (!r.ok()) return std::string(r.status().message());
    ADD_FAILURE() << "accepted:\n" << text;
    return "";
  };
  const std::string two = R"({"layers": [{"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]},
    {"name": "other", "type": "linear", "inputs": ["dense", "embeddings"]}], "heads": )";
  EXPECT_THAT(error(two + R"([{"input": "top"}, {"input": "other", "label": "bougth"}]})"),
              HasSubstr("head \"head1\": no label \"bougth\" in the schema (did you mean \"bought\"?) "
                        "(its labels: clicked, bought"));
  EXPECT_THAT(error(two + R"([{"input": "top"}, {"name": "head1", "input": "other"}, {"input": "top"}]})"),
              HasSubstr("head \"head2\": \"top\" is another head's logit"));
  EXPECT_THAT(error(two + R"([{"name": "a", "input": "top"}, {"name": "a", "input": "other"}]})"),
              HasSubstr("m.json:2: two heads named \"a\""));
  EXPECT_THAT(error(two + R"([{"input": "top", "loss": "mse"}, {"input": "other"}]})"),
              HasSubstr("the first head is the job's headline"));
  EXPECT_THAT(error(two + R"([{"input": "top", "loss": "l1"}, {"input": "other"}]})"),
              HasSubstr("\"loss\" is \"bce\""));
  EXPECT_THAT(error(two + R"([{"input": "top", "weight": 0}, {"input": "other"}]})"),
              HasSubstr("\"weight\" must be a number in (0, 1000]"));
  // ESMM's "times": an earlier probability head, one level.
  EXPECT_THAT(error(two + R"([{"name": "click", "input": "top"}, {"input": "other", "times": "clik"}]})"),
              HasSubstr("m.json:2: head \"head1\": \"times\": no earlier head \"clik\" (did you mean \"click\"?)"));
  EXPECT_THAT(error(two + R"([{"name": "a", "input": "top", "times": "b"}, {"name": "b", "input": "other"}]})"),
              HasSubstr("head \"a\": \"times\": no earlier head \"b\""));
  EXPECT_THAT(error(two + R"([{"name": "a", "input": "top"}, {"name": "b", "input": "other", "times": "b"}]})"),
              HasSubstr("head \"b\": \"times\": no earlier head \"b\""));
  EXPECT_THAT(error(two + R"([{"name": "a", "input": "top"}, {"name": "b", "input": "other", "times": "a", "loss": "mse"}]})"),
              HasSubstr("a conditioned head and the head it names are probability heads"));
  EXPECT_THAT(error(R"({"layers": [{"name": "e", "type": "mlp", "inputs": ["dense", "embeddings"], "widths": [4]},
    {"name": "g", "type": "gate", "input": "dense", "experts": ["e"]},
    {"name": "top", "type": "linear", "input": "g"}], "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"g\" (gate): \"experts\": \"e\" is not an experts layer (the file has none)"));
  EXPECT_THAT(error(R"({"layers": [{"name": "a", "type": "experts", "inputs": ["dense", "embeddings"], "count": 2, "widths": [4]},
    {"name": "b", "type": "experts", "input": "dense", "count": 2, "widths": [3]},
    {"name": "g", "type": "gate", "input": "dense", "experts": ["a", "b"]},
    {"name": "top", "type": "linear", "input": "g"}], "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"g\" (gate): its experts must be of one width"));
  const std::string linear = R"("layers": [{"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}], "heads": [{"input": "top"}]})";
  EXPECT_THAT(error(R"({"table_init": {"emb.itme": "zeros"}, )" + linear),
              HasSubstr("m.json:1: \"table_init\": no embedding table \"emb.itme\" (did you mean \"emb.item\"?)"));
  EXPECT_THAT(error(R"({"table_init": {"emb.item": {"normal": -1}}, )" + linear),
              HasSubstr("\"table_init\": \"emb.item\" is \"zeros\", {\"uniform\": SCALE}, {\"normal\": SCALE}, "
                        "{\"uniform\": \"1/sqrt(dim)\"} or {\"uniform\": \"sqrt(1/rows)\"} "
                        "(TorchRec's: rows = the column's hash_buckets), SCALE in (0, 100]"));
  EXPECT_THAT(error(R"json({"embedding_init": {"uniform": "sqrt(1/dim)"}, )json" + linear),
              HasSubstr("m.json:1: \"embedding_init\" is \"zeros\""));
  in.ids_of = {-1, -1, 1};  // ad's ids are item's: one table, emb.item
  EXPECT_THAT(error(R"({"table_init": {"emb.ad": "zeros"}, )" + linear),
              HasSubstr("no embedding table \"emb.ad\" (\"ad\" looks up \"emb.item\": its ids are that column's)"));
  in.ids_of.clear();
  EXPECT_THAT(error(R"({"layers": [{"name": "p", "type": "pool", "sequence": "ad", "pooling": "max"},
    {"name": "top", "type": "linear", "inputs": ["p", "dense", "user", "item"]}], "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"p\": \"pooling\" is \"sum\" or \"mean\""));
  EXPECT_THAT(error(R"({"layers": [{"name": "p", "type": "pool", "input": "ad"},
    {"name": "top", "type": "linear", "inputs": ["p", "dense", "user", "item"]}], "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"p\" (pool) reads its \"sequence\" only"));
  EXPECT_THAT(error(R"({"layers": [{"name": "a", "type": "experts", "inputs": ["dense", "embeddings"], "widths": [4]},
    {"name": "top", "type": "linear", "input": "a"}], "heads": [{"input": "top"}]})"),
              HasSubstr("layer \"a\" (experts) needs a \"count\" and \"widths\""));
}

}  // namespace
}  // namespace pstrain::worker::graph
