#include "job/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace pstrain::job {
namespace {

using ::testing::HasSubstr;

TEST(JobSpec, ReadsSectionsNestedObjectsListsAndComments) {
  auto spec = JobSpec::Parse(R"json({
  // a comment
  "name": "j",
  "cluster": {"workers": 3, "allreduce": {"overlap": false}},
  "tables": [{"name": "*", "dim": 8, "admission": {"min_count": 2}},
             {"name": "dense", "lr": 0.01},
             {"name": "emb.C1", "weight_decay": 0.5, "init": "normal:0.01"},
             {"name": "emb.C2", "init": "uniform:sqrt(1/rows)"}],
  "model": {"name": "dlrm", "bottom_mlp": [32, 8]},
  "train": {"batch_size": 256}
})json",
                             "j.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "j");
  EXPECT_EQ(spec->Find("workers")->value, "3");
  EXPECT_EQ(spec->Find("overlap")->value, "false");
  EXPECT_EQ(spec->Find("embedding_dim")->value, "8");
  EXPECT_EQ(spec->Find("min_count")->value, "2");
  EXPECT_EQ(spec->Find("dense_lr")->value, "0.01");
  EXPECT_EQ(spec->Find("table_weight_decay")->value, "emb.C1=0.5");
  EXPECT_EQ(spec->Find("table_init")->value, "emb.C1=normal:0.01,emb.C2=uniform:sqrt(1/rows)");
  EXPECT_EQ(spec->Find("bottom_mlp")->value, "32,8");
  EXPECT_EQ(spec->Find("batch_size")->value, "256");
  EXPECT_EQ(spec->Find("batch_size")->where, "j.json:10");
  EXPECT_EQ(spec->Find("batch_size")->source, Source::kFile);
  EXPECT_EQ(spec->Find("epochs"), nullptr);
}

TEST(JobSpec, ToJsonReadsBackToTheSameValues) {
  auto spec = JobSpec::Parse(R"({"cluster": {"mode": "allreduce"},
    "tables": [{"name": "*", "eviction": {"policy": "lfu"}}, {"name": "emb.*", "weight_decay": 0.1},
               {"name": "dense", "optimizer": "sgd"}, {"name": "emb.C3", "init": "zeros"}],
    "data": {"train": ["a.tsv", "b.tsv"]}, "export": {"save_model": "m"}})",
                             "a.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto again = JobSpec::Parse(spec->ToJson(), "coordinator", Source::kCoordinator);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << spec->ToJson();
  ASSERT_EQ(again->values().size(), spec->values().size());
  for (size_t i = 0; i < spec->values().size(); ++i) {
    EXPECT_EQ(again->values()[i].field, spec->values()[i].field);
    EXPECT_EQ(again->values()[i].value, spec->values()[i].value);
    EXPECT_EQ(again->values()[i].source, Source::kCoordinator);
  }
  EXPECT_EQ(again->Find("train_data")->value, "a.tsv,b.tsv");
}

// The network inline: "model": {"graph": {...}} is one field whose value is
// the graph's JSON, handed to the coordinator (ToJson) as an object again.
TEST(JobSpec, AModelGraphInlineIsOneFieldThatReadsBack) {
  auto spec = JobSpec::Parse(R"({"model": {"graph": {
      // comments inside it too
      "layers": [{"name": "top", "type": "linear", "inputs": ["dense", "embeddings"]}],
      "heads": [{"input": "top"}]}},
    "train": {"batch_size": 64}})",
                             "g.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const JobValue* graph = spec->Find("model_graph");
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->value,
            R"({"layers":[{"name":"top","type":"linear","inputs":["dense","embeddings"]}],"heads":[{"input":"top"}]})");
  EXPECT_EQ(graph->where, "g.json:1");
  EXPECT_THAT(spec->ToJson(), HasSubstr("\"graph\": {"));
  auto again = JobSpec::Parse(spec->ToJson(), "coordinator", Source::kCoordinator);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << spec->ToJson();
  EXPECT_EQ(again->Find("model_graph")->value, graph->value);
  EXPECT_EQ(again->Find("batch_size")->value, "64");
}

TEST(JobSpec, ErrorsNameTheFileTheLineAndTheClosestField) {
  auto typo = JobSpec::Parse("{\n  \"train\": {\n    \"batchsize\": 64\n  }\n}", "job.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()),
              HasSubstr("job.json:3: unknown field train.batchsize (did you mean train.batch_size?)"));
  auto flag_name = JobSpec::Parse(R"({"model": {"embedding_dim": 8}})", "job.json");
  ASSERT_FALSE(flag_name.ok());
  EXPECT_THAT(std::string(flag_name.status().message()),
              HasSubstr("the field of --embedding_dim is tables.*.dim"));
  auto node = JobSpec::Parse(R"({"cluster": {"rank": 1}})", "job.json");
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("cluster.rank is not part of a job"));
  auto section = JobSpec::Parse(R"({"training": {}})", "job.json");
  ASSERT_FALSE(section.ok());
  EXPECT_THAT(std::string(section.status().message()), HasSubstr("unknown section \"training\""));
  auto table = JobSpec::Parse(R"({"tables": [{"name": "emb.C1", "dim": 4}]})", "job.json");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("a table's own \"dim\" is not supported"));
  auto json = JobSpec::Parse("{\n\"train\": {\"epochs\": 2,}\n}", "job.json");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(std::string(json.status().message()), HasSubstr("job.json:2: not valid JSON"));
  auto null_value = JobSpec::Parse(R"({"train": {"epochs": null}})", "job.json");
  ASSERT_FALSE(null_value.ok());
  auto missing = JobSpec::ReadFile("/nonexistent/job.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/job.json"));
}

TEST(JobSpec, FlagArgsGoToTheRolesThatReadThem) {
  auto spec = JobSpec::Parse(
      R"({"cluster": {"servers": 2, "server_threads": 4}, "train": {"epochs": 3}})", "j.json");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->FlagArgs(kWorker), std::vector<std::string>{"--epochs=3"});
  EXPECT_EQ(spec->FlagArgs(kServer), std::vector<std::string>{"--server_threads=4"});
  EXPECT_EQ(spec->FlagArgs(kCoordinator), std::vector<std::string>{"--servers=2"});
}

TEST(JobFields, EveryFlagHasOneField) {
  std::set<std::string> flags, paths;
  for (const JobField& f : JobFields()) {
    EXPECT_TRUE(flags.insert(std::string(f.flag)).second) << f.flag;
    EXPECT_TRUE(paths.insert(std::string(f.path)).second) << f.path;
    EXPECT_EQ(FieldOfFlag(f.flag), &f);
    EXPECT_EQ(FieldAtPath(f.path), &f);
  }
}

}  // namespace
}  // namespace pstrain::job
