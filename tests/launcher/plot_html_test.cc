// pstrain plot: the HTML page it writes.
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

}  // namespace
}  // namespace pstrain::launcher
