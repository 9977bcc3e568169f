#include "serve/model_io.h"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/missing_values.h"
#include "data/synthetic.h"
#include "serve/predictor.h"
#include "tests/serve/random_model.h"

namespace pstrain::worker {
namespace {

class ModelIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pstrain-model-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ModelIoTest, WriteThenReadGivesTheSameModel) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  auto r = ReadModel(dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model.name, "dlrm");
  EXPECT_EQ(r->model.bottom_mlp, m.model.bottom_mlp);
  EXPECT_EQ(r->step, 7);
  ASSERT_EQ(r->tables.size(), m.tables.size());
  for (size_t i = 0; i < m.tables.size(); ++i) {
    EXPECT_EQ(r->tables[i].spec.name, m.tables[i].spec.name);
    EXPECT_EQ(r->tables[i].dense, m.tables[i].dense);
    EXPECT_EQ(r->tables[i].ids, m.tables[i].ids);
    EXPECT_EQ(r->tables[i].rows, m.tables[i].rows);
  }
}

TEST_F(ModelIoTest, TheEvaluationThatChoseAModelIsReadBack) {
  SavedModel m = RandomModel();
  m.chosen = ModelChoice{"eval_auc", 4, 120, 0.8125, 0.43};
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  auto r = ReadModel(dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chosen.metric, "eval_auc");
  EXPECT_EQ(r->chosen.round, 4);
  EXPECT_EQ(r->chosen.step, 120);
  EXPECT_DOUBLE_EQ(r->chosen.eval_auc, 0.8125);
  EXPECT_DOUBLE_EQ(r->chosen.eval_logloss, 0.43);
  // A model saved without --keep_best records no choice.
  ASSERT_TRUE(WriteModel(dir_ / "plain", RandomModel()).ok());
  auto plain = ReadModel((dir_ / "plain").string());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->chosen.metric.empty());
}

TEST_F(ModelIoTest, ReplaceModelSwapsTheWholeFolderAndLeavesNoTemp) {
  SavedModel first = RandomModel();
  first.step = 10;
  const std::string dir = (dir_ / "model").string();
  std::filesystem::create_directories(dir_);
  std::string in_place = "unset";
  ASSERT_TRUE(ReplaceModel(dir, first, &in_place).ok());
  EXPECT_EQ(in_place, "");
  // A stale file of the old folder does not survive the swap: the folder
  // is replaced, not written over.
  std::ofstream(dir + "/stale.txt") << "old";
  SavedModel second = RandomModel();
  second.step = 20;
  second.tables[0].dense.assign(second.tables[0].dense.size(), 0.5f);
  ASSERT_TRUE(ReplaceModel(dir, second, &in_place).ok());
  EXPECT_EQ(in_place, "");
  auto r = ReadModel(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 20);
  EXPECT_EQ(r->tables[0].dense, second.tables[0].dense);
  EXPECT_FALSE(std::filesystem::exists(dir + "/stale.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
}

TEST_F(ModelIoTest, CorruptTableFileIsRefusedNamingTheFile) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  std::string victim = (dir_ / (m.tables[0].spec.name + ".tbl")).string();
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  auto r = ReadModel(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(victim), std::string::npos) << r.status();
}

TEST_F(ModelIoTest, TruncatedTableFileIsRefused) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  std::filesystem::path victim = dir_ / (m.tables.back().spec.name + ".tbl");
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) - 3);
  EXPECT_EQ(ReadModel(dir_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ModelIoTest, MissingManifestIsNotFound) {
  EXPECT_EQ(ReadModel(dir_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelIoTest, PredictFileWritesOneProbabilityPerRowDeterministically) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_ / "model", m).ok());
  SyntheticOptions so;
  so.rows = 300;
  std::string data = (dir_ / "data.tsv").string();
  ASSERT_TRUE(WriteSynthetic(so, data).ok());
  PredictOptions po;
  po.model_dir = (dir_ / "model").string();
  po.data = {data};
  po.out = (dir_ / "scores.txt").string();
  po.batch_size = 128;
  auto r = PredictFile(po);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 300);
  // The file holds one probability per row, each in (0, 1).
  std::ifstream in(po.out);
  int lines = 0;
  double p;
  while (in >> p) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
    ++lines;
  }
  EXPECT_EQ(lines, 300);
  // Scoring again gives the same AUC (deterministic, ids unseen in the
  // export get their initializer rows).
  auto again = PredictFile(po);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->metrics.auc, r->metrics.auc);
}

TEST_F(ModelIoTest, MissingTokensAreRecordedAndAModelSavedBeforeThemReadsNone) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  absl::StatusOr<SavedModel> back = ReadModel(dir_.string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->schema.missing_tokens, DefaultMissingTokens());
  // The same manifest without the key, as models were saved before it.
  const std::string path = (dir_ / "model.json").string();
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(path));
  ASSERT_TRUE(manifest["model"].contains("missing_values"));
  manifest["model"].erase("missing_values");
  std::ofstream(path) << manifest.dump(2);
  back = ReadModel(dir_.string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->schema.missing_tokens.empty()) << "NA stays a token, as it was trained";
}

// The embedding initializer travels with the model (an unseen id reads as
// its row's start when served); a model saved before it existed started
// its rows at U(+-1/sqrt(dim)), whatever today's default.
TEST_F(ModelIoTest, EmbeddingInitIsReadBackAndAnOlderModelsIsOneOverSqrtDim) {
  SavedModel m = RandomModel();
  m.model.embedding_init = ParseEmbeddingInit("normal:0.03").value();
  m.model.table_init = {{"emb.C2", ParseEmbeddingInit("zeros").value()}};
  ASSERT_TRUE(WriteModel(dir_, m).ok());
  absl::StatusOr<SavedModel> back = ReadModel(dir_.string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EmbeddingInitText(back->model.embedding_init), "normal:0.03");
  ASSERT_EQ(back->model.table_init.size(), 1u);
  EXPECT_EQ(back->model.table_init[0].first, "emb.C2");
  EXPECT_EQ(EmbeddingInitText(back->model.table_init[0].second), "zeros");
  const std::string path = (dir_ / "model.json").string();
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(path));
  manifest["model"].erase("embedding_init");
  std::ofstream(path) << manifest.dump(2);
  back = ReadModel(dir_.string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EmbeddingInitText(back->model.embedding_init), "uniform:1/sqrt(dim)");
  manifest["model"]["embedding_init"] = "uniform:-3";
  std::ofstream(path) << manifest.dump(2);
  back = ReadModel(dir_.string());
  ASSERT_FALSE(back.ok());
  EXPECT_NE(std::string(back.status().message()).find("'uniform:-3' is not an embedding initializer"),
            std::string::npos) << back.status();
}

TEST_F(ModelIoTest, PredictFileMarksBadLinesInPlaceOrFailsAtTheFirst) {
  SavedModel m = RandomModel();
  ASSERT_TRUE(WriteModel(dir_ / "model", m).ok());
  SyntheticOptions so;
  so.rows = 50;
  const std::string data = (dir_ / "data.tsv").string();
  ASSERT_TRUE(WriteSynthetic(so, data).ok());
  std::string text;
  {
    std::ifstream in(data);
    std::string line;
    for (int i = 1; std::getline(in, line); ++i) {
      text += (i == 20 ? "1\t2\t3" : line) + "\n";
      if (i == 30) text += "\n";  // a blank line after line 30
    }
  }
  std::ofstream(data) << text;
  PredictOptions po;
  po.model_dir = (dir_ / "model").string();
  po.data = {data};
  po.out = (dir_ / "scores.txt").string();
  po.batch_size = 8;
  absl::StatusOr<PredictResult> r = PredictFile(po);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 49);
  EXPECT_EQ(r->bad_lines, 1);
  EXPECT_EQ(r->blank_lines, 1);
  EXPECT_EQ(r->first_bad.rfind(data + ":20: 3 fields", 0), 0u) << r->first_bad;
  std::ifstream in(po.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 51u) << "one line per input line";
  EXPECT_EQ(lines[19], "\t3 fields, the Criteo layout expects 40");
  EXPECT_EQ(lines[30], "\tblank line");
  EXPECT_NE(lines[18].find('.'), std::string::npos);
  po.on_bad_line = OnBadLine::kFail;
  r = PredictFile(po);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(data + ":20: 3 fields"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace pstrain::worker
