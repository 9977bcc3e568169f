// pstrain plot: reading metrics files into runs, and the page it writes.
#include "launcher/plot_html.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace pstrain::launcher {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string dir = ::testing::TempDir() + "/plot_html_test";
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

TEST(PlotHtml, ReadsProgressEvalAndSummaryLines) {
  int bad = -1;
  auto runs = ReadRunCurves(WriteTemp("a.jsonl", kRun), "a", &bad);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  const RunCurves& r = (*runs)[0];
  EXPECT_EQ(r.step, (std::vector<double>{10, 20}));
  EXPECT_EQ(r.loss, (std::vector<double>{0.6, 0.5}));
  EXPECT_EQ(r.eval_auc, (std::vector<double>{0.71}));
  EXPECT_NE(r.summary_json.find("\"model\":\"lr\""), std::string::npos);
  EXPECT_EQ(bad, 0);
}

TEST(PlotHtml, AFileAppendedByTwoRunsGivesTwoRunsAndSkipsBadLines) {
  std::string text = std::string(kRun) + "not json\n" + kRun;
  int bad = 0;
  auto runs = ReadRunCurves(WriteTemp("twice.jsonl", text), "twice", &bad);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[1].name, "twice #2");
  EXPECT_EQ((*runs)[1].step.size(), 2u);
  EXPECT_EQ(bad, 1);
}

TEST(PlotHtml, AFileWithoutRecordsIsAnError) {
  auto runs = ReadRunCurves(WriteTemp("empty.jsonl", "\n{\"x\":1}\n"), "e", nullptr);
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRunCurves("/nonexistent/m.jsonl", "n", nullptr).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PlotHtml, PageIsSelfContainedAndItsDataCannotCloseTheScript) {
  auto runs = ReadRunCurves(WriteTemp("b.jsonl", kRun), "</script><b>x", nullptr);
  ASSERT_TRUE(runs.ok());
  std::string html = PlotHtml(*runs, "My <runs>");
  EXPECT_EQ(html.find("/*PSTRAIN_"), std::string::npos);       // every slot filled
  EXPECT_NE(html.find("uPlot"), std::string::npos);            // the library is inlined
  EXPECT_NE(html.find("class LineChart"), std::string::npos);  // and the chart helper
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);       // nothing loaded from outside
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_NE(html.find("<title>My &lt;runs&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("\"loss\":[0.6,0.5]"), std::string::npos);
}

TEST(PlotHtml, DefaultNamesAreFileNamesUnlessTheyClash) {
  EXPECT_EQ(DefaultRunNames({"x/a.jsonl", "y/b.jsonl"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(DefaultRunNames({"x/m.jsonl", "y/m.jsonl"}),
            (std::vector<std::string>{"x/m.jsonl", "y/m.jsonl"}));
}

}  // namespace
}  // namespace pstrain::launcher
