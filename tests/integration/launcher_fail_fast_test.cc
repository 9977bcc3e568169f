// `pstrain local` run as a user would, with bad invocations: each fails
// fast, with one line and exit code 2, before any child process exists.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class LauncherFailFast : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("fail-fast");
    // Stand-ins for the cluster binaries: each leaves a mark when started.
    fake_bin_ = dir_ + "/bin";
    std::filesystem::create_directories(fake_bin_);
    for (const char* name : {"pstrain_coordinator", "pstrain_server", "pstrain_worker"}) {
      const std::string path = fake_bin_ + "/" + name;
      std::ofstream(path) << "#!/bin/sh\ntouch \"$0.started\"\nexit 1\n";
      chmod(path.c_str(), 0755);
    }
    std::string good;
    for (int i = 0; i < 10; ++i) {
      std::vector<std::string> cols = {"1"};
      for (int d = 0; d < 13; ++d) cols.push_back(std::to_string(d));
      for (int c = 0; c < 26; ++c) cols.push_back(absl::StrCat("v", c));
      good += absl::StrJoin(cols, "\t") + "\n";
    }
    train_ = dir_ + "/train.tsv";
    std::ofstream(train_) << good;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  bool AnyChildStarted() const {
    for (const auto& e : std::filesystem::directory_iterator(fake_bin_)) {
      if (e.path().extension() == ".started") return true;
    }
    return false;
  }

  // Runs `pstrain local ARGS` and checks that it failed as it should.
  void ExpectFailsFast(const std::vector<std::string>& args, const std::string& message) {
    std::vector<std::string> a = {"local", "--bin_dir=" + fake_bin_};
    a.insert(a.end(), args.begin(), args.end());
    const std::string log = dir_ + "/log";
    const absl::Time start = absl::Now();
    TestProcess p(BinDir() + "/pstrain", a, log);
    const int code = p.Wait(absl::Seconds(30));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const std::string out = p.Log();
    std::printf("pstrain local %s: exit %d in %.3f s: %s", absl::StrJoin(args, " ").c_str(), code,
                seconds, out.c_str());
    EXPECT_EQ(code, 2) << out;
    // Well under a second on an idle machine; the bound leaves room for a
    // loaded CI machine.
    EXPECT_LT(seconds, 3.0);
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 1u) << out;
    EXPECT_THAT(lines[0], StartsWith("pstrain local: "));
    EXPECT_THAT(lines[0], HasSubstr(message));
    EXPECT_FALSE(AnyChildStarted()) << "a child process was started";
  }

  std::string dir_, fake_bin_, train_;
};

TEST_F(LauncherFailFast, NoFlagsAtAll) { ExpectFailsFast({}, "--train_data (or --train_stream) is required"); }

TEST_F(LauncherFailFast, ABadNumber) {
  ExpectFailsFast({"--train_data=" + train_, "--lr=abc"}, "--lr=abc");
}

TEST_F(LauncherFailFast, AMisspelledFlag) {
  ExpectFailsFast({"--train_data=" + train_, "--batchsize=64"}, "did you mean --batch_size?");
}

TEST_F(LauncherFailFast, AnUnknownModel) {
  ExpectFailsFast({"--train_data=" + train_, "--model=foo"}, "unknown model 'foo'");
}

TEST_F(LauncherFailFast, AWeightDecayForATableTheModelDoesNotHave) {
  ExpectFailsFast({"--train_data=" + train_, "--table_weight_decay=embedding.C1=1e-4"},
                  "no table of the model is named 'embedding.C1'");
}

TEST_F(LauncherFailFast, DropoutForAModelWithoutTowers) {
  ExpectFailsFast({"--train_data=" + train_, "--model=lr", "--dropout=0.2"},
                  "dropout is not built for model lr");
}

TEST_F(LauncherFailFast, AMissingDataFile) {
  ExpectFailsFast({"--train_data=" + dir_ + "/missing.tsv"}, "missing.tsv");
}

TEST_F(LauncherFailFast, AnEmptyTrainingFile) {
  const std::string empty = dir_ + "/empty.tsv";
  std::ofstream(empty).close();
  ExpectFailsFast({"--train_data=" + empty}, "--train_data: no data (1 empty file, the first " + empty);
}

TEST_F(LauncherFailFast, AnUnknownKeepBestMetric) {
  ExpectFailsFast({"--train_data=" + train_, "--eval_data=" + train_, "--save_model=" + dir_ + "/m",
                   "--keep_best=auc"},
                  "--keep_best: unknown metric 'auc'");
}

TEST_F(LauncherFailFast, KeepBestWithoutSaveModel) {
  ExpectFailsFast({"--train_data=" + train_, "--eval_data=" + train_, "--keep_best=eval_logloss"},
                  "--keep_best needs --eval_data");
}

TEST_F(LauncherFailFast, ANegativeEarlyStopRounds) {
  ExpectFailsFast({"--train_data=" + train_, "--early_stop_rounds=-1"},
                  "--early_stop_rounds must be >= 0");
}

TEST_F(LauncherFailFast, EarlyStopWithoutPeriodicEvaluations) {
  ExpectFailsFast({"--train_data=" + train_, "--eval_data=" + train_, "--early_stop_rounds=3"},
                  "--early_stop_rounds needs evaluation rounds: --eval_every_steps, --eval_every_epochs");
}

TEST_F(LauncherFailFast, ABadCoordinatorFlag) {
  ExpectFailsFast({"--train_data=" + train_, "--consistency=fast"}, "--consistency=fast");
}

// Every wrong model file of docs/model-file.md, refused before a child starts.
TEST_F(LauncherFailFast, AWrongModelFile) {
  int files = 0;
  const auto model = [this, &files](const std::string& layers,
                                    const std::string& heads = "[{\"input\": \"top\"}]") {
    const std::string path = absl::StrCat(dir_, "/model", ++files, ".json");
    std::ofstream(path) << "{\"layers\": [\n" << layers << "\n], \"heads\": " << heads << "}\n";
    return "--model_file=" + path;
  };
  const std::string all = R"("inputs": ["dense", "embeddings"])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {model(R"({"name": "a", "type": "mlp", "input": "top", "widths": [4]},
{"name": "top", "type": "linear", "inputs": ["a", "dense", "embeddings"]})"),
       "model1.json:2: a cycle: layers \"a\", \"top\" read each other"},
      {model(R"({"name": "top", "type": "linear", "input": "embeddings"})"),
       "the dense columns (\"dense\") feed no layer"},
      {model(R"({"name": "i", "type": "dot_interaction", )" + all + R"(},
{"name": "top", "type": "linear", "input": "i"})"),
       "layer \"i\" (dot_interaction): its inputs must be of one width; \"dense\" is 13 wide"},
      {model(R"({"name": "top", "type": "attention", )" + all + "}"),
       "layer \"top\": unknown type \"attention\""},
      {model(R"({"name": "top", "type": "linear", "widths": [4], )" + all + "}"),
       "layer \"top\" (linear): unknown key \"widths\" (did you mean \"width\"?)"},
      {model(R"({"name": "top", "type": "mlp", "widths": [4], )" + all + "}"),
       "head \"click\": \"top\" is 4 wide"},
      {model(R"({"name": "top", "type": "linear", )" + all + "}", "[]"), "no \"heads\""},
  };
  for (const auto& [flag, message] : cases) {
    SCOPED_TRACE(message);
    ExpectFailsFast({"--train_data=" + train_, flag}, message);
  }
}

TEST_F(LauncherFailFast, AGoodInvocationStartsTheCluster) {
  // The control: with good flags the (fake) coordinator is started, and
  // its failure is the launcher's (exit 1).
  TestProcess p(BinDir() + "/pstrain", {"local", "--bin_dir=" + fake_bin_, "--train_data=" + train_},
                dir_ + "/log");
  EXPECT_EQ(p.Wait(absl::Seconds(60)), 1) << p.Log();
  EXPECT_TRUE(std::filesystem::exists(fake_bin_ + "/pstrain_coordinator.started")) << p.Log();
}

TEST(BinaryHelp, EveryBinaryExplainsItselfExitsZeroAndNamesNoBuildPath) {
  const std::string dir = MakeTempDir("help");
  const std::vector<std::vector<std::string>> runs = {
      {"pstrain", "--help"},           {"pstrain", "local", "--help"},
      {"pstrain", "train", "--help"},  {"pstrain", "gen", "--help"},
      {"pstrain_worker", "--help"},    {"pstrain_server", "--help"},
      {"pstrain_coordinator", "--help"}};
  for (const auto& run : runs) {
    TestProcess p(BinDir() + "/" + run[0], std::vector<std::string>(run.begin() + 1, run.end()),
                  dir + "/log");
    EXPECT_EQ(p.Wait(absl::Seconds(30)), 0) << absl::StrJoin(run, " ") << ": " << p.Log();
    const std::string out = p.Log();
    EXPECT_THAT(out, HasSubstr("usage: ")) << absl::StrJoin(run, " ");
    EXPECT_THAT(out, ::testing::Not(HasSubstr(".cc"))) << absl::StrJoin(run, " ") << ": " << out;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("Flags from"))) << absl::StrJoin(run, " ");
  }
  // The worker's help lists its flags.
  TestProcess worker(BinDir() + "/pstrain_worker", {"--help"}, dir + "/log");
  worker.Wait(absl::Seconds(30));
  EXPECT_THAT(worker.Log(), HasSubstr("--batch_size (default: 1024)"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
