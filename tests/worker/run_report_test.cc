#include "worker/run_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "worker/progress.h"
#include "worker/trainer.h"

namespace pstrain::worker {
namespace {

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            ("pstrain_run_report_" + std::to_string(::getpid()) + "_" + name))
                               .string();
  std::ofstream(path) << contents;
  return path;
}

TEST(RunReport, OracleAucIsReadFromTheMetaFile) {
  const std::string path = TempFile("meta.json", R"({"rows": 10, "oracle_auc": 0.8125})");
  absl::StatusOr<double> oracle = ReadOracleAuc(path);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  EXPECT_DOUBLE_EQ(*oracle, 0.8125);
  std::filesystem::remove(path);
}

TEST(RunReport, OracleAucIsNanWithoutAMetaFileOrItsNumber) {
  absl::StatusOr<double> none = ReadOracleAuc("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(std::isnan(*none));
  const std::string path = TempFile("no_oracle.json", R"({"rows": 10})");
  absl::StatusOr<double> missing = ReadOracleAuc(path);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(std::isnan(*missing));
  std::filesystem::remove(path);
}

TEST(RunReport, OracleAucOfAnUnreadableFileIsAnError) {
  EXPECT_FALSE(ReadOracleAuc("/nonexistent/pstrain/meta.json").ok());
}

TEST(RunReport, RecordEvalFillsTheResultsEvalFigures) {
  BinaryMetrics m;
  m.auc = 0.75;
  m.logloss = 0.5;
  m.accuracy = 0.9;
  m.normalized_entropy = 0.8;
  m.calibration = 1.1;
  m.count = 123;
  absl::StatusOr<std::unique_ptr<MetricsFile>> metrics = MetricsFile::Open("");
  ASSERT_TRUE(metrics.ok());
  TrainResult result;
  RecordEval(m, 40, "at step 40", 1.0, metrics->get(), &result);
  EXPECT_EQ(result.eval_auc, 0.75);
  EXPECT_EQ(result.eval_logloss, 0.5);
  EXPECT_EQ(result.eval_accuracy, 0.9);
  EXPECT_EQ(result.eval_ne, 0.8);
  EXPECT_EQ(result.eval_calibration, 1.1);
  EXPECT_EQ(result.eval_rows, 123);
}

TEST(RunReport, SummaryFiguresComeInTheirOrderAndAreNullWithoutEvaluation) {
  TrainResult result;
  result.steps = 10;
  result.eval_auc = 0.5;
  JsonLine evaluated;
  AddSummaryFigures(result, JobFigures{100, 50, NAN, 2, /*evaluated=*/true}, &evaluated);
  const std::string text = evaluated.str();
  const char* keys[] = {"steps",          "train_samples",   "eval_auc",      "oracle_auc",
                        "eval_logloss",   "eval_ne",         "eval_calibration", "eval_accuracy",
                        "samples_per_sec", "wall_seconds",   "compute_seconds", "wait_seconds",
                        "data_seconds"};
  size_t at = 0;
  for (const char* key : keys) {
    const size_t found = text.find(std::string("\"") + key + "\"");
    ASSERT_NE(found, std::string::npos) << key << " in " << text;
    EXPECT_GE(found, at) << key << " out of order in " << text;
    at = found;
  }
  EXPECT_NE(text.find("\"train_samples\":100"), std::string::npos) << text;
  EXPECT_NE(text.find("\"eval_auc\":0.5"), std::string::npos) << text;
  JsonLine unevaluated;
  AddSummaryFigures(result, JobFigures{100, 50, NAN, 2, /*evaluated=*/false}, &unevaluated);
  EXPECT_NE(unevaluated.str().find("\"eval_auc\":null"), std::string::npos) << unevaluated.str();
}

}  // namespace
}  // namespace pstrain::worker
