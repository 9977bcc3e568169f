// A user's own data through the real binaries: a CSV with a header and the
// label last, described by a schema file, trained by one `pstrain local`;
// the same rows in the Criteo layout, as CSV, as .gz and as .zst train
// bit-identical models; bad
// inputs fail before training with a message naming the file and column.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/compress_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;

class OwnData : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("own-data"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // `pstrain local ARGS`: the exit code; the output in *out.
  int Local(const std::vector<std::string>& args, std::string* out, const std::string& tag,
            absl::Duration timeout = absl::Seconds(180)) {
    std::vector<std::string> a = {"local", "--servers=1", "--workers=1", "--log_every_secs=60"};
    a.insert(a.end(), args.begin(), args.end());
    TestProcess p(BinDir() + "/pstrain", a, dir_ + "/" + tag + ".log");
    const int code = p.Wait(timeout);
    *out = p.Log();
    std::printf("--- pstrain local (%s): exit %d\n%s", tag.c_str(), code,
                out->substr(out->size() > 3000 ? out->size() - 3000 : 0).c_str());
    return code;
  }

  // A click log no one designed for pstrain: 3 decimal columns, 5
  // categorical ones, the label last, made by a logistic rule.
  std::string ClickLog(const std::string& name, int rows, uint64_t seed) {
    std::mt19937_64 world(7);  // the rule: the same for train and eval
    std::normal_distribution<double> normal;
    std::vector<std::vector<double>> weight(5, std::vector<double>(30));
    for (auto& w : weight) {
      for (double& x : w) x = normal(world);
    }
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> token(0, 29);
    std::uniform_real_distribution<double> unit(0, 1);
    std::string text = "price,dwell,score,site,city,device,ad,slot,clicked\n";
    for (int r = 0; r < rows; ++r) {
      const double price = std::exp(normal(rng) + 3), dwell = 20 * unit(rng), score = normal(rng);
      double logit = 0.8 * (std::log1p(price) - 3) - 0.1 * (dwell - 10) + 0.7 * score;
      std::vector<std::string> cols = {absl::StrFormat("%.2f", price),
                                       absl::StrFormat("%.3f", dwell),
                                       absl::StrFormat("%.4f", score)};
      for (int c = 0; c < 5; ++c) {
        const int t = token(rng);
        logit += weight[c][t];
        cols.push_back(absl::StrCat(std::string(1, static_cast<char>('a' + c)), "_", t));
      }
      cols.push_back(unit(rng) < 1 / (1 + std::exp(-logit)) ? "1" : "0");
      text += absl::StrJoin(cols, ",") + "\n";
    }
    return Write(name, text);
  }

  std::string dir_;
};

TEST_F(OwnData, NewUsersCsvTrainsWithOneCommand) {
  const std::string train = ClickLog("train.csv", 40000, 1);
  const std::string eval = ClickLog("eval.csv", 8000, 2);
  const std::string schema = Write("clicks.json", R"({
    "format": "csv", "header": true, "label": "clicked",
    "dense": [{"column": "price", "transform": "log1p"},
              {"column": "dwell", "transform": "standardize"}, "score"],
    "sparse": ["site", "city", "device", "ad", "slot"]
  })");
  const std::string metrics = dir_ + "/metrics.jsonl";
  std::string out;
  ASSERT_EQ(Local({"--schema=" + schema, "--train_data=" + train, "--eval_data=" + eval,
                   "--epochs=2", "--metrics_out=" + metrics, "--save_model=" + dir_ + "/model"},
                  &out, "new-user"),
            0);
  const double auc = LastJsonNumber(metrics, "eval_auc");
  std::printf("new user's CSV: eval AUC %.4f\n", auc);
  EXPECT_GT(auc, 0.75) << "the rule is learnable (its own AUC is about 0.82)";
  EXPECT_THAT(out, HasSubstr("eval_auc"));
  // The saved model records the schema; predict reads the CSV with it.
  const std::string manifest = ReadFile(dir_ + "/model/model.json");
  EXPECT_THAT(manifest, HasSubstr("\"schema\""));
  EXPECT_THAT(manifest, HasSubstr("\"dwell\""));
  TestProcess p(BinDir() + "/pstrain",
                {"predict", "--model=" + dir_ + "/model", "--data=" + eval,
                 "--out=" + dir_ + "/pred.txt"},
                dir_ + "/predict.log");
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Log();
  std::vector<std::string> preds =
      absl::StrSplit(ReadFile(dir_ + "/pred.txt"), '\n', absl::SkipEmpty());
  EXPECT_EQ(preds.size(), 8000u) << "one prediction per row, the header skipped";
  // The same rows on standard input.
  TestProcess piped("/bin/sh",
                    {"-c", absl::StrCat(BinDir(), "/pstrain predict --model=", dir_,
                                        "/model --data=- --out=", dir_, "/pred2.txt < ", eval)},
                    dir_ + "/predict-stdin.log");
  ASSERT_EQ(piped.Wait(absl::Seconds(60)), 0) << piped.Log();
  EXPECT_EQ(ReadFile(dir_ + "/pred2.txt"), ReadFile(dir_ + "/pred.txt"));
}

TEST_F(OwnData, PerColumnWidthsAndMeanPooling) {
  const std::string train = ClickLog("train.csv", 20000, 1);
  const std::string eval = ClickLog("eval.csv", 4000, 2);
  const std::string schema = Write("widths.json", R"({
    "format": "csv", "header": true, "label": "clicked", "embedding_dim": 8,
    "dense": [{"column": "price", "transform": "log1p"}, "dwell", "score"],
    "sparse": [{"column": "site", "embedding_dim": 4}, {"column": "city", "pooling": "mean"},
               "device", {"column": "ad", "embedding_dim": 16}, "slot"]
  })");
  const std::string metrics = dir_ + "/metrics.jsonl";
  std::string out;
  ASSERT_EQ(Local({"--schema=" + schema, "--model=wide_deep", "--train_data=" + train,
                   "--eval_data=" + eval, "--metrics_out=" + metrics,
                   "--save_model=" + dir_ + "/model"},
                  &out, "widths"),
            0);
  EXPECT_GT(LastJsonNumber(metrics, "eval_auc"), 0.7);
  const std::string manifest = ReadFile(dir_ + "/model/model.json");
  EXPECT_THAT(manifest, HasSubstr("\"embedding_dim\": 16"));
  TestProcess p(BinDir() + "/pstrain",
                {"predict", "--model=" + dir_ + "/model", "--data=" + eval}, dir_ + "/p.log");
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Log();
  EXPECT_THAT(p.Log(), HasSubstr("scored 4000 rows"));
  // dlrm's dot interaction cannot take them: refused before training.
  EXPECT_EQ(Local({"--schema=" + schema, "--train_data=" + train}, &out, "widths-dlrm",
                  absl::Seconds(30)),
            2);
  EXPECT_THAT(out, HasSubstr("column \"site\" has embedding_dim 4"));
}

TEST_F(OwnData, SameRowsAsCriteoTsvAndAsCsvTrainTheSameModel) {
  TrainEval data = WriteTrainEval(dir_, /*seed=*/5, /*train_rows=*/6000, /*eval_rows=*/1000);
  // The same rows as CSV: a header, the categorical columns first, then
  // the integers, the label last.
  std::string csv;
  {
    std::vector<std::string> header;
    for (int c = 1; c <= 26; ++c) header.push_back(absl::StrCat("C", c));
    for (int i = 1; i <= 13; ++i) header.push_back(absl::StrCat("I", i));
    header.push_back("label");
    csv = absl::StrJoin(header, ",") + "\n";
    std::ifstream in(data.train);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> cols = absl::StrSplit(line, '\t');
      ASSERT_EQ(cols.size(), 40u);
      std::vector<std::string> out(cols.begin() + 14, cols.end());
      out.insert(out.end(), cols.begin() + 1, cols.begin() + 14);
      out.push_back(cols[0]);
      csv += absl::StrJoin(out, ",") + "\n";
    }
  }
  const std::string csv_path = Write("train.csv", csv);
  std::string schema_text = ReadFile(std::string(PSTRAIN_SOURCE_DIR) +
                                     "/examples/schemas/criteo_as_csv.json");
  ASSERT_FALSE(schema_text.empty());
  const std::string schema = Write("criteo_as_csv.json", schema_text);
  const std::vector<std::string> common = {"--consistency=bsp", "--seed=3", "--batch_size=256"};
  auto train = [&](const std::vector<std::string>& data_args, const std::string& tag) {
    std::vector<std::string> a = common;
    a.insert(a.end(), data_args.begin(), data_args.end());
    a.push_back("--save_model=" + dir_ + "/" + tag);
    std::string out;
    EXPECT_EQ(Local(a, &out, tag), 0);
    return dir_ + "/" + tag;
  };
  // Compressed: the TSV as gzip, the CSV as zstd under a name that does not
  // say so (read by content).
  const std::string gz = dir_ + "/train.tsv.gz", zst = dir_ + "/train_csv.data";
  ASSERT_TRUE(worker::CompressFile(data.train, gz, worker::Compression::kGzip, -1).ok());
  ASSERT_TRUE(worker::CompressFile(csv_path, zst, worker::Compression::kZstd, 3).ok());
  const std::string tsv_model = train({"--train_data=" + data.train}, "tsv");
  const std::vector<std::pair<std::string, std::string>> others = {
      {"csv", train({"--train_data=" + csv_path, "--schema=" + schema}, "csv")},
      {"gz", train({"--train_data=" + gz}, "gz")},
      {"zst", train({"--train_data=" + zst, "--schema=" + schema}, "zst")}};
  int tables = 0;
  for (const auto& e : std::filesystem::directory_iterator(tsv_model)) {
    if (e.path().extension() != ".tbl") continue;
    ++tables;
    for (const auto& [name, model] : others) {
      const std::string other = model + "/" + e.path().filename().string();
      EXPECT_TRUE(ReadFile(e.path()) == ReadFile(other))
          << e.path().filename() << " differs between the TSV and the " << name << " run";
    }
  }
  EXPECT_GT(tables, 26);
}

TEST_F(OwnData, BadInputsFailBeforeTrainingNamingFileAndColumn) {
  TrainEval data = WriteTrainEval(dir_, 5, 200, 100);
  std::string csv = ReadFile(data.train);
  for (char& c : csv) c = c == '\t' ? ',' : c;
  const std::string comma = Write("comma.tsv", csv);
  const std::string empty = Write("empty.tsv", "");
  const std::string header_only = Write("header.csv", "a,b,label\n");
  const std::string bad_schema = Write("typo.json", R"({"format": "csv", "header": true,
      "label": "label", "dense": ["aa"], "sparse": ["b"]})");
  const std::string semicolon =
      Write("ratings.csv", "user;item;rating;year\n1;31;1;1999\n2;7;0;2003\n");
  const std::string csv_schema = Write("ratings.json", R"({"format": "csv", "header": true,
      "label": "rating", "dense": [{"column": "year", "transform": "standardize"}],
      "sparse": ["user", "item"]})");
  const std::string semicolon_rows = Write("rows.csv", "1;31;1;1999\n2;7;0;2003\n");
  const std::string by_columns = Write("columns.json", R"({"format": "csv",
      "columns": ["user", "item", "rating", "year"], "label": "rating", "dense": ["year"],
      "sparse": ["user", "item"]})");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {{"--train_data=" + comma}, {"comma.tsv:1: 1 field", "--field_sep=comma"}},
      {{"--train_data=" + empty}, {"--train_data", "no data", "empty.tsv"}},
      {{"--train_data=" + header_only, "--schema=" + Write("h.json", R"({"format": "csv",
          "header": true, "label": "label", "dense": ["a"], "sparse": ["b"]})")},
       {"no data rows", "header.csv"}},
      {{"--train_data=" + header_only, "--schema=" + bad_schema},
       {"typo.json", "dense[0]", "no column \"aa\"", "did you mean \"a\""}},
      {{"--train_data=" + data.train, "--eval_data=" + comma}, {"--eval_data", "comma.tsv"}},
      // Semicolons where the schema says CSV: named from the header, or the first line.
      {{"--train_data=" + semicolon, "--schema=" + csv_schema},
       {"ratings.csv", "no column \"rating\"", "the file seems to be separated by ';' (set "
        "\"separator\": \"semicolon\" in the schema)"}},
      {{"--train_data=" + semicolon_rows, "--schema=" + by_columns},
       {"rows.csv:1: 1 field, the schema expects 4; the file seems to be separated by ';' (set "
        "\"separator\": \"semicolon\" in the schema); the line: \"1;31;1;1999\""}},
  };
  for (const Case& c : cases) {
    std::string out;
    const int code = Local(c.args, &out, "bad", absl::Seconds(30));
    EXPECT_EQ(code, 2) << absl::StrJoin(c.args, " ");
    for (const std::string& s : c.says) EXPECT_THAT(out, HasSubstr(s)) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(out, ::testing::Not(HasSubstr("trained"))) << "training started";
  }
}

}  // namespace
}  // namespace pstrain::testing
