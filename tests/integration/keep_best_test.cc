// Real processes on 127.0.0.1: a run that overfits (a small training set,
// many epochs, a high learning rate, evaluated every few steps) with
// --keep_best keeps the best round's model, not the last one; with
// --early_stop_rounds every worker stops before the last epoch and the run
// ends well.
#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "serve/model_io.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;

// A job whose eval AUC peaks early and then falls. Measured (2 workers,
// BSP, wide_deep, lr 0.1, batches of 256): 0.562 0.596 0.611 0.630 0.621
// 0.629 0.617 0.623 0.618 0.597 ... 0.574 at the end (round 4, step 20,
// is the best).
constexpr int64_t kTrainRows = 10000;
constexpr int64_t kEvalRows = 3000;
constexpr int kBatch = 256;
constexpr int kEpochs = 6;
constexpr int kEvalEvery = 5;

struct EvalPoint {
  int64_t step;
  double auc;
};

// The "eval" lines of a metrics file, in order.
std::vector<EvalPoint> EvalPoints(const std::string& path) {
  std::ifstream in(path);
  std::vector<EvalPoint> points;
  std::regex step_re("\"step\":([0-9]+)"), auc_re("\"eval_auc\":([-0-9.eE]+)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"eval\"") == std::string::npos) continue;
    std::smatch s, a;
    if (std::regex_search(line, s, step_re) && std::regex_search(line, a, auc_re)) {
      points.push_back({std::stoll(s[1]), std::stod(a[1])});
    }
  }
  return points;
}

class KeepBest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("keep-best");
    data_ = WriteTrainEval(dir_, 11, kTrainRows, kEvalRows);
    model_ = dir_ + "/model";
    metrics_ = dir_ + "/metrics.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The overfitting job on 2 workers (BSP: every part of a round scores the
  // same model), with `extra` flags; returns the exit code.
  int RunJob(const std::vector<std::string>& extra, std::string* out) {
    std::vector<std::string> args = {"local", "--servers=1", "--workers=2", "--consistency=bsp",
                                     "--model=wide_deep", "--lr=0.1",
                                     absl::StrCat("--batch_size=", kBatch),
                                     absl::StrCat("--epochs=", kEpochs),
                                     absl::StrCat("--eval_every_steps=", kEvalEvery),
                                     "--train_data=" + data_.train, "--eval_data=" + data_.eval,
                                     "--save_model=" + model_, "--metrics_out=" + metrics_,
                                     "--log_every_secs=1000", "--timeout=60"};
    args.insert(args.end(), extra.begin(), extra.end());
    TestProcess p(BinDir() + "/pstrain", args, dir_ + "/launcher.log");
    const int code = p.Wait(absl::Seconds(90));
    *out = p.Log();
    return code;
  }

  std::string dir_, model_, metrics_;
  TrainEval data_;
};

TEST_F(KeepBest, TheSavedModelIsTheBestRoundsNotTheLast) {
  std::string out;
  ASSERT_EQ(RunJob({"--keep_best=eval_auc"}, &out), 0) << out;
  const std::vector<EvalPoint> points = EvalPoints(metrics_);
  ASSERT_GE(points.size(), 5u) << out;
  size_t best = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    std::printf("round %zu step %lld: eval AUC %.4f\n", i + 1, static_cast<long long>(points[i].step),
                points[i].auc);
    if (points[i].auc > points[best].auc) best = i;
  }
  // The job overfits: the best round is well before the end and clearly
  // better than the last.
  ASSERT_LT(best + 1, points.size()) << out;
  ASSERT_GT(points[best].auc, points.back().auc + 0.01) << out;

  auto saved = worker::ReadModel(model_);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->chosen.metric, "eval_auc");
  EXPECT_EQ(saved->chosen.round, static_cast<int>(best) + 1);
  EXPECT_EQ(saved->chosen.step, points[best].step);
  EXPECT_EQ(saved->step, points[best].step);
  EXPECT_NEAR(saved->chosen.eval_auc, points[best].auc, 1e-4);
  EXPECT_THAT(out, HasSubstr(absl::StrCat("--keep_best: ", model_, " holds the model of round ",
                                          best + 1, " (step ", points[best].step, ")")));

  // Scoring the eval data with the saved model gives the best round's AUC.
  TestProcess predict(BinDir() + "/pstrain", {"predict", "--model=" + model_, "--data=" + data_.eval},
                      dir_ + "/predict.log");
  ASSERT_EQ(predict.Wait(absl::Seconds(30)), 0) << predict.Log();
  std::smatch m;
  const std::string log = predict.Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("AUC ([0-9.]+)"))) << log;
  const double predicted = std::stod(m[1]);
  EXPECT_NEAR(predicted, points[best].auc, 2e-3) << log;
  EXPECT_GT(predicted, points.back().auc + 0.005) << log;
}

TEST_F(KeepBest, EarlyStopEndsEveryWorkerBeforeTheLastEpochAndExitsZero) {
  std::string out;
  ASSERT_EQ(RunJob({"--keep_best=eval_auc", "--early_stop_rounds=2"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("[worker 0]"));
  // Both workers stopped at the lead's verdict.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("early stop at step ([0-9]+): eval_auc has not "
                                                   "improved for 2 evaluations")))
      << out;
  const std::string stop_step = m[1];
  EXPECT_THAT(out, HasSubstr("early stop at step " + stop_step + ": the lead worker's verdict"));
  const std::vector<EvalPoint> points = EvalPoints(metrics_);
  ASSERT_GE(points.size(), 3u);
  // Stopped two rounds after the best, long before the planned steps
  // (kEpochs passes over kTrainRows rows in batches of kBatch on 2 workers).
  const int64_t planned = kEpochs * (kTrainRows / 2 / kBatch);
  EXPECT_LT(std::stoll(stop_step), planned / 2) << out;
  EXPECT_EQ(LastJsonNumber(metrics_, "steps"), std::stoll(stop_step));
  EXPECT_THAT(out, HasSubstr("\"early_stopped\":true"));
  auto saved = worker::ReadModel(model_);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->chosen.step + 2 * kEvalEvery, std::stoll(stop_step));
}

}  // namespace
}  // namespace pstrain::testing
