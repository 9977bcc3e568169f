// Real processes on 127.0.0.1, with data that fails: an empty training set
// fails before training (a plain worker, `pstrain train`), an empty shard
// of one worker does not, and an evaluation that fails after training still
// leaves the trained model in --save_model, with a non-zero exit that says
// both.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "serve/model_io.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DataFailure : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("data-failure"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs BinDir()/binary ARGS; returns its exit code (-1: still running
  // after `timeout`, then killed) and its output in `out`.
  int Run(const std::string& binary, const std::vector<std::string>& args, absl::Duration timeout,
          std::string* out) {
    TestProcess p(BinDir() + "/" + binary, args, dir_ + "/" + binary + ".log");
    const int code = p.Wait(timeout);
    *out = p.Log();
    return code;
  }

  // `path` rewritten: its first `good` lines kept, every later one replaced
  // by one that does not parse when `bad_every` divides its index.
  static void SpoilAfter(const std::string& path, int good, int bad_every) {
    std::ifstream in(path);
    std::ostringstream out;
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) {
      out << (i >= good && (i - good) % bad_every == 0 ? "not\ta\trow" : line) << "\n";
    }
    in.close();
    std::ofstream(path, std::ios::trunc) << out.str();
  }

  std::string dir_;
};

TEST_F(DataFailure, APlainWorkerWithAnEmptyTrainingFileFailsBeforeJoining) {
  const std::string empty = dir_ + "/empty.tsv";
  std::ofstream(empty).close();
  // No coordinator listens there: the worker must fail before it looks.
  std::string out;
  const absl::Time start = absl::Now();
  const int code = Run("pstrain_worker",
                       {absl::StrCat("--coordinator=tcp://127.0.0.1:", FreePort()),
                        "--connect_timeout=20", "--train_data=" + empty},
                       absl::Seconds(30), &out);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << out;
  EXPECT_LT(absl::ToDoubleSeconds(absl::Now() - start), 10.0) << out;
  EXPECT_THAT(out, HasSubstr("--train_data: no data"));
  EXPECT_THAT(out, HasSubstr(empty));
}

TEST_F(DataFailure, PstrainTrainWithAnEmptyTrainingOrEvalFileFailsBeforeTraining) {
  const TrainEval d = WriteTrainEval(dir_, 5, 2000, 500);
  const std::string empty = dir_ + "/empty.tsv";
  std::ofstream(empty).close();
  std::string out;
  int code = Run("pstrain", {"train", "--model=lr", "--train_data=" + empty}, absl::Seconds(30), &out);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << out;
  EXPECT_THAT(out, HasSubstr("--train_data: no data"));
  EXPECT_THAT(out, HasSubstr(empty));
  EXPECT_THAT(out, Not(HasSubstr("trained ")));

  code = Run("pstrain", {"train", "--model=lr", "--train_data=" + d.train, "--eval_data=" + empty},
             absl::Seconds(30), &out);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << out;
  EXPECT_THAT(out, HasSubstr("--eval_data: no data"));
  EXPECT_THAT(out, Not(HasSubstr("trained ")));
}

TEST_F(DataFailure, AWorkerWhoseShardIsEmptyIsFineWhenTheSetHasRows) {
  // Two rows in one file and three workers: the shards of some are empty.
  const TrainEval d = WriteTrainEval(dir_, 5, 2, 300);
  const std::string metrics = dir_ + "/metrics.jsonl";
  std::string out;
  const int code = Run("pstrain",
                       {"local", "--servers=1", "--workers=3", "--model=lr", "--train_data=" + d.train,
                        "--eval_data=" + d.eval, "--metrics_out=" + metrics, "--timeout=60"},
                       absl::Seconds(90), &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("trained 0 steps"));  // an empty shard
  EXPECT_EQ(LastJsonNumber(metrics, "train_samples"), 2) << out;
}

TEST_F(DataFailure, AnEvalThatFailsOnAnotherWorkerAfterTrainingStillSavesTheModel) {
  // The first lines parse (the start-up check passes) and the second half
  // does not: worker 1's shard of the eval data fails, after training.
  const TrainEval d = WriteTrainEval(dir_, 5, 4000, 2000);
  SpoilAfter(d.eval, 1000, 1);
  const std::string model = dir_ + "/model";
  std::string out;
  int code = Run("pstrain",
                 {"local", "--servers=1", "--workers=2", "--model=lr", "--batch_size=256",
                  "--train_data=" + d.train, "--eval_data=" + d.eval, "--save_model=" + model,
                  "--timeout=60"},
                 absl::Seconds(90), &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("trained "));
  EXPECT_THAT(out, HasSubstr("evaluating --eval_data=" + d.eval));
  EXPECT_THAT(out, HasSubstr("too many bad lines"));
  EXPECT_THAT(out, HasSubstr("the trained model was saved to " + model));
  auto saved = worker::ReadModel(model);
  ASSERT_TRUE(saved.ok()) << saved.status() << "\n" << out;
  EXPECT_GT(saved->step, 0);
  // It scores the training file (pstrain predict loads it).
  code = Run("pstrain", {"predict", "--model=" + model, "--data=" + d.train}, absl::Seconds(30), &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("scored 4000 rows"));
}

TEST_F(DataFailure, AnEvalThatFailsOnTheLeadAfterTrainingStillSavesTheModel) {
  // One bad line in two after the first 10: the single worker's own part fails.
  const TrainEval d = WriteTrainEval(dir_, 5, 3000, 1500);
  SpoilAfter(d.eval, 10, 2);
  const std::string model = dir_ + "/model";
  std::string out;
  const int code = Run("pstrain",
                       {"train", "--model=lr", "--batch_size=256", "--train_data=" + d.train,
                        "--eval_data=" + d.eval, "--save_model=" + model},
                       absl::Seconds(60), &out);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << out;
  EXPECT_THAT(out, HasSubstr("evaluating --eval_data=" + d.eval));
  EXPECT_THAT(out, HasSubstr("the trained model was saved to " + model));
  auto saved = worker::ReadModel(model);
  ASSERT_TRUE(saved.ok()) << saved.status() << "\n" << out;
  EXPECT_GT(saved->step, 0);
}

}  // namespace
}  // namespace pstrain::testing
