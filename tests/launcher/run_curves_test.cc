// Reading --metrics_out files back into runs (pstrain plot, pstrain dashboard --job_dir).
#include "launcher/run_curves.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace pstrain::launcher {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string dir = ::testing::TempDir() + "/run_curves_test";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char kRun[] =
    R"({"event":"progress","step":10,"samples":10240,"loss":0.6,"samples_per_sec":5000,"elapsed_seconds":2})"
    "\n"
    R"({"event":"progress","step":20,"samples":20480,"loss":0.5,"samples_per_sec":5100,"elapsed_seconds":4})"
    "\n"
    R"({"event":"eval","step":20,"eval_auc":0.71,"eval_logloss":0.52,"eval_rows":1000})"
    "\n"
    R"({"event":"summary","model":"lr","eval_auc":0.71,"oracle_auc":null,"samples_per_sec":5050})"
    "\n";

TEST(RunCurves, ReadsProgressEvalAndSummaryLines) {
  int skipped = -1;
  auto runs = ReadRunCurves(WriteTemp("a.jsonl", kRun), "a", &skipped);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  const RunCurves& r = (*runs)[0];
  EXPECT_EQ(r.step, (std::vector<double>{10, 20}));
  EXPECT_EQ(r.loss, (std::vector<double>{0.6, 0.5}));
  EXPECT_EQ(r.eval_auc, (std::vector<double>{0.71}));
  ASSERT_EQ(r.eval_ne.size(), 1u);
  EXPECT_TRUE(std::isnan(r.eval_ne[0]));  // an older line: no NE
  EXPECT_NE(r.summary_json.find("\"model\":\"lr\""), std::string::npos);
  EXPECT_EQ(skipped, 0);
}

TEST(RunCurves, NewEvalFieldsAreReadAndUnknownFieldsAndEventsIgnored) {
  const std::string text =
      R"({"event":"eval","step":5,"eval_auc":0.7,"eval_logloss":0.5,"eval_ne":0.93,"eval_calibration":1.02,"eval_positive_rate":0.25,"something_new":[1,2]})"
      "\n"
      R"({"event":"checkpoint","step":5,"path":"x"})"
      "\n";
  auto runs = ReadRunCurves(WriteTemp("ne.jsonl", text), "ne", nullptr);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].eval_ne, (std::vector<double>{0.93}));
  EXPECT_EQ((*runs)[0].eval_calibration, (std::vector<double>{1.02}));
  EXPECT_TRUE(AnyValue(*runs, &RunCurves::eval_ne));
  EXPECT_FALSE(AnyValue(*runs, &RunCurves::loss));
}

// A model of several heads: each head's figures, by eval line, NaN where a
// line lacks them (a regression head has no AUC).
TEST(RunCurves, EachHeadsEvalFieldsAreItsCurves) {
  const std::string text =
      R"({"event":"eval","step":10,"eval_auc":0.6,"click.eval_auc":0.6,"click.eval_logloss":0.5,"spend.eval_logloss":3})"
      "\n"
      R"({"event":"eval","step":20,"eval_auc":0.7,"click.eval_auc":0.7,"click.eval_logloss":0.45,"convert.eval_auc":0.62,"spend.eval_logloss":2})"
      "\n";
  auto runs = ReadRunCurves(WriteTemp("heads.jsonl", text), "heads", nullptr);
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunCurves& r = (*runs)[0];
  ASSERT_EQ(r.heads.size(), 3u);
  EXPECT_EQ(r.heads[0].name, "click");
  EXPECT_EQ(r.heads[0].auc, (std::vector<double>{0.6, 0.7}));
  EXPECT_EQ(r.heads[0].logloss, (std::vector<double>{0.5, 0.45}));
  EXPECT_EQ(r.heads[1].name, "spend");
  EXPECT_TRUE(std::isnan(r.heads[1].auc[0]) && std::isnan(r.heads[1].auc[1]));
  EXPECT_EQ(r.heads[1].logloss, (std::vector<double>{3, 2}));
  EXPECT_EQ(r.heads[2].name, "convert");
  ASSERT_EQ(r.heads[2].auc.size(), 2u);
  EXPECT_TRUE(std::isnan(r.heads[2].auc[0]));  // first seen on the second line
  EXPECT_EQ(r.heads[2].auc[1], 0.62);
}

TEST(RunCurves, AFileAppendedByTwoRunsGivesTwoRuns) {
  auto runs = ReadRunCurves(WriteTemp("twice.jsonl", std::string(kRun) + kRun), "twice", nullptr);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[1].name, "twice #2");
  EXPECT_EQ((*runs)[1].step.size(), 2u);
}

TEST(RunCurves, AMalformedLineIsAnErrorNamingTheFileAndLine) {
  const std::string path = WriteTemp("bad.jsonl", std::string(kRun) + "not json\n" + kRun);
  auto runs = ReadRunCurves(path, "bad", nullptr);
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runs.status().message().find(path + ":5: not a JSON object"), std::string::npos)
      << runs.status();
}

TEST(RunCurves, ALastLineCutShortIsSkippedAndCounted) {
  int skipped = 0;
  auto runs = ReadRunCurves(WriteTemp("cut.jsonl", std::string(kRun) + "{\"event\":\"progr"),
                            "cut", &skipped);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ((*runs)[0].step.size(), 2u);
}

TEST(RunCurves, MissingEmptyAndRecordlessFilesAreErrorsNamingTheFile) {
  auto missing = ReadRunCurves("/nonexistent/m.jsonl", "n", nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/m.jsonl"), std::string::npos);
  const std::string empty = WriteTemp("empty.jsonl", "\n\n");
  auto e = ReadRunCurves(empty, "e", nullptr);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find(empty + ": empty"), std::string::npos);
  auto none = ReadRunCurves(WriteTemp("none.jsonl", "{\"x\":1}\n"), "n", nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no progress, eval or summary records"),
            std::string::npos);
}

TEST(RunCurves, DefaultNamesAreFileNamesUnlessTheyClash) {
  EXPECT_EQ(DefaultRunNames({"x/a.jsonl", "y/b.jsonl"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(DefaultRunNames({"x/m.jsonl", "y/m.jsonl"}),
            (std::vector<std::string>{"x/m.jsonl", "y/m.jsonl"}));
}

}  // namespace
}  // namespace pstrain::launcher
