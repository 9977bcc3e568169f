// The built-in networks are graphs of their shape flags: with the flags'
// defaults each is the file shipped as examples/models/<name>.json, and a
// flag reshapes it.
#include "model/models/built_in_graphs.h"

#include <string>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/graph/model_graph.h"

namespace pstrain::worker {
namespace {

using graph::LayerSpec;
using graph::ModelGraph;

// A layer in words, every key a built-in network sets.
std::string Describe(const LayerSpec& l) {
  return absl::StrCat(l.name, " ", graph::LayerTypeName(l.type), " in [", absl::StrJoin(l.inputs, ","),
                      "] widths [", absl::StrJoin(l.widths, ","), "] relu_last ", l.relu_last,
                      " tower ", l.tower, " he ", l.he_init, " dropout ", l.dropout, " layers ",
                      l.layers, " rank ", l.rank, " columns [", absl::StrJoin(l.columns, ","),
                      "] bias ", l.bias);
}

class ShippedFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedFile, IsTheBuiltInNetworkOfTheDefaultFlags) {
  const std::string path =
      absl::StrCat(PSTRAIN_SOURCE_DIR, "/examples/models/", GetParam(), ".json");
  absl::StatusOr<ModelGraph> file = graph::ReadModelGraph(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ModelOptions defaults;  // 13 dense and 26 categorical columns, --embedding_dim=16
  defaults.name = GetParam();
  absl::StatusOr<ModelGraph> built = BuiltInGraph(defaults);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->name, file->name);
  EXPECT_EQ(built->embedding_dim == 0 ? 16 : built->embedding_dim,
            file->embedding_dim == 0 ? 16 : file->embedding_dim);
  EXPECT_EQ(built->embedding_init.has_value(), file->embedding_init.has_value());
  if (built->embedding_init && file->embedding_init) {
    EXPECT_EQ(EmbeddingInitText(*built->embedding_init), EmbeddingInitText(*file->embedding_init));
  }
  EXPECT_TRUE(file->table_init.empty());
  ASSERT_EQ(built->layers.size(), file->layers.size());
  for (size_t i = 0; i < file->layers.size(); ++i) {
    EXPECT_EQ(Describe(built->layers[i]), Describe(file->layers[i])) << path << " layer " << i;
  }
  ASSERT_EQ(built->heads.size(), 1u);
  ASSERT_EQ(file->heads.size(), 1u);
  EXPECT_EQ(built->heads[0].name, file->heads[0].name);
  EXPECT_EQ(built->heads[0].input, file->heads[0].input);
  EXPECT_EQ(built->heads[0].label, file->heads[0].label);
  EXPECT_EQ(built->heads[0].regression, file->heads[0].regression);
  EXPECT_EQ(built->heads[0].weight, file->heads[0].weight);
}

INSTANTIATE_TEST_SUITE_P(Six, ShippedFile,
                         ::testing::Values("lr", "wide_deep", "dlrm", "deep_tower", "dcn_v2",
                                           "deepfm"));

TEST(BuiltInGraph, TheShapeFlagsReshapeIt) {
  ModelOptions o;
  o.name = "dcn_v2";
  o.bottom_mlp = {32, 8};
  o.top_mlp = {128};
  o.cross_layers = 2;
  o.cross_rank = 0;
  absl::StatusOr<ModelGraph> g = BuiltInGraph(o);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 3u);
  EXPECT_EQ(g->layers[0].widths, (std::vector<int>{32, 8}));
  EXPECT_EQ(g->layers[1].layers, 2);
  EXPECT_EQ(g->layers[1].rank, 0);
  EXPECT_EQ(g->layers[2].widths, (std::vector<int>{128, 1})) << "the logit is added";
  // Without categorical columns the networks read the dense ones alone.
  o.name = "wide_deep";
  o.num_sparse = 0;
  g = BuiltInGraph(o);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 1u);
  EXPECT_EQ(g->layers[0].inputs, (std::vector<std::string>{"dense"}));
  EXPECT_EQ(g->heads[0].input, "deep");
}

TEST(BuiltInGraph, AShapeTheNetworkCannotHaveNamesTheFlag) {
  ModelOptions o;
  o.name = "dlrm";
  o.bottom_mlp = {64, 8};
  absl::StatusOr<ModelGraph> g = BuiltInGraph(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()),
              ::testing::HasSubstr("the last bottom_mlp width must equal embedding_dim (16)"));
  o.name = "deepfm";
  o.field_dims = {16, 8};
  g = BuiltInGraph(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr("field C2 is 8"));
  o.name = "dllrm";
  g = BuiltInGraph(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr("unknown model 'dllrm'"));
}

}  // namespace
}  // namespace pstrain::worker
