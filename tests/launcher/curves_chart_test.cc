// pstrain plot --png/--svg: the image, decoded back with cairo.
#include "launcher/curves_chart.h"

#include <cairo.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "launcher/command.h"
#include "launcher/commands.h"

namespace pstrain::launcher {
namespace {

std::string TempPath(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/curves_chart_test";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run whose loss falls in a straight line from 1 at step 0 to 0 at 100,
// at `rate` samples/s, with evals at steps 50 and 100.
RunCurves Line(const std::string& name, double rate, double top = 1.0) {
  RunCurves r;
  r.name = name;
  r.file = name + ".jsonl";
  for (int s = 0; s <= 100; s += 10) {
    r.step.push_back(s);
    r.loss.push_back(top * (1 - s / 100.0));
    r.samples_per_sec.push_back(rate);
    r.elapsed.push_back(s / 10.0);
  }
  r.eval_step = {50, 100};
  r.eval_auc = {0.70, 0.75};
  r.eval_logloss = {0.50, 0.47};
  r.eval_ne = {NAN, NAN};
  r.eval_calibration = {NAN, NAN};
  r.eval_elapsed = {5, 10};
  return r;
}

// The decoded image.
class Png {
 public:
  explicit Png(const std::string& path)
      : surface_(cairo_image_surface_create_from_png(path.c_str())) {}
  ~Png() { cairo_surface_destroy(surface_); }
  bool ok() const { return cairo_surface_status(surface_) == CAIRO_STATUS_SUCCESS; }
  int width() const { return cairo_image_surface_get_width(surface_); }
  int height() const { return cairo_image_surface_get_height(surface_); }
  uint32_t At(int x, int y) const {
    cairo_surface_flush(surface_);
    const unsigned char* row =
        cairo_image_surface_get_data(surface_) + y * cairo_image_surface_get_stride(surface_);
    return reinterpret_cast<const uint32_t*>(row)[x] & 0xffffff;
  }
  // The distance from `rgb` of the closest pixel within `r` of (x, y).
  int Closest(double x, double y, uint32_t rgb, int r = 1) const {
    int best = 1 << 30;
    for (int dy = -r; dy <= r; ++dy) {
      for (int dx = -r; dx <= r; ++dx) {
        const uint32_t p = At(static_cast<int>(std::lround(x)) + dx, static_cast<int>(std::lround(y)) + dy);
        int d = 0;
        for (int shift : {0, 8, 16}) d += std::abs(static_cast<int>((p >> shift) & 255) - static_cast<int>((rgb >> shift) & 255));
        best = std::min(best, d);
      }
    }
    return best;
  }

 private:
  cairo_surface_t* surface_;
};

TEST(CurvesChart, ThePngHasTheSignatureAndTheLayoutsSize) {
  const std::vector<RunCurves> runs = {Line("a", 5000)};
  const std::string path = TempPath("size.png");
  ASSERT_TRUE(WriteCurvesPng(runs, "t", path, 1000).ok());
  EXPECT_EQ(Slurp(path).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const ChartLayout layout = LayoutCurves(runs, 1000);
  EXPECT_EQ(layout.panels.size(), 4u);  // loss, samples/s, AUC, logloss: no NE in these runs
  Png png(path);
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png.width(), 1000);
  EXPECT_EQ(png.height(), layout.height);
}

TEST(CurvesChart, CurvesAreDrawnWhereTheDataSaysInEachRunsColour) {
  const std::vector<RunCurves> runs = {Line("a", 5000), Line("b", 8000, 0.5)};
  const std::string path = TempPath("curves.png");
  ASSERT_TRUE(WriteCurvesPng(runs, "two runs", path).ok());
  Png png(path);
  ASSERT_TRUE(png.ok());
  const ChartLayout layout = LayoutCurves(runs);
  const ChartLayout::Panel& loss = layout.panels[0];
  EXPECT_EQ(loss.title, "Training loss");
  // On each line: run a at (30, 0.7), run b at (30, 0.35).
  EXPECT_LT(png.Closest(loss.X(30), loss.Y(0.7), RunColor(0)), 40);
  EXPECT_LT(png.Closest(loss.X(30), loss.Y(0.35), RunColor(1)), 40);
  // Off them (between the lines, away from the grid): background, not a curve.
  EXPECT_GT(png.Closest(loss.X(35), loss.Y(0.47), RunColor(0), 0), 200);
  EXPECT_GT(png.Closest(loss.X(35), loss.Y(0.47), RunColor(1), 0), 200);
  // Throughput: flat lines at 5000 and 8000.
  const ChartLayout::Panel& sps = layout.panels[1];
  EXPECT_LT(png.Closest(sps.X(60), sps.Y(5000), RunColor(0)), 40);
  EXPECT_LT(png.Closest(sps.X(60), sps.Y(8000), RunColor(1)), 40);
  // AUC: run b's eval points are drawn over a's (the same values).
  const ChartLayout::Panel& auc = layout.panels[2];
  EXPECT_LT(png.Closest(auc.X(100), auc.Y(0.75), RunColor(1)), 40);
  // The plot areas lie inside the image.
  for (const ChartLayout::Panel& p : layout.panels) {
    EXPECT_GT(p.left, 0);
    EXPECT_LT(p.right, png.width());
    EXPECT_LT(p.bottom, png.height());
    EXPECT_FALSE(p.empty) << p.title;
  }
}

TEST(CurvesChart, NormalizedEntropyGetsAPanelWhenTheFilesHaveIt) {
  RunCurves r = Line("a", 5000);
  r.eval_ne = {0.95, 0.90};
  const ChartLayout layout = LayoutCurves({r});
  ASSERT_EQ(layout.panels.size(), 5u);
  EXPECT_EQ(layout.panels[4].y_label, "NE");
  const std::string path = TempPath("ne.png");
  ASSERT_TRUE(WriteCurvesPng({r}, "ne", path).ok());
  Png png(path);
  EXPECT_EQ(png.height(), layout.height);
  EXPECT_LT(png.Closest(layout.panels[4].X(100), layout.panels[4].Y(0.90), RunColor(0)), 40);
}

TEST(CurvesChart, APanelWithoutDataIsEmptyNotAnError) {
  RunCurves r = Line("a", 5000);
  r.eval_step.clear();
  r.eval_auc.clear();
  r.eval_logloss.clear();
  const ChartLayout layout = LayoutCurves({r});
  EXPECT_TRUE(layout.panels[2].empty);
  EXPECT_TRUE(WriteCurvesPng({r}, "no eval", TempPath("empty.png")).ok());
}

TEST(CurvesChart, TheSvgIsAVectorImage) {
  const std::string path = TempPath("curves.svg");
  ASSERT_TRUE(WriteCurvesSvg({Line("a", 5000)}, "svg", path).ok());
  const std::string svg = Slurp(path);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<path"), std::string::npos);
}

TEST(CurvesChart, AnUnwritablePathIsAnErrorNamingIt) {
  absl::Status st = WriteCurvesPng({Line("a", 1)}, "t", "/nonexistent/dir/x.png");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/dir/x.png"), std::string::npos);
}

TEST(CurvesChart, TicksAreRoundNumbersCoveringTheRange) {
  EXPECT_EQ(NiceTicks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> auc = NiceTicks(0.695, 0.755, 6);
  const std::vector<double> want = {0.7, 0.71, 0.72, 0.73, 0.74, 0.75};
  ASSERT_EQ(auc.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(auc[i], want[i], 1e-12);
  EXPECT_EQ(NiceTicks(20000, 65000, 5), (std::vector<double>{20000, 30000, 40000, 50000, 60000}));
  EXPECT_TRUE(NiceTicks(1, 1).empty());
}

TEST(CurvesChart, PlotWritesAPngNextToTheMetricsFileAndRefusesBadFilesWithExit2) {
  const std::string metrics = TempPath("run.jsonl");
  std::ofstream(metrics)
      << R"({"event":"progress","step":10,"loss":0.6,"samples_per_sec":5000,"elapsed_seconds":2})"
      << "\n"
      << R"({"event":"progress","step":20,"loss":0.5,"samples_per_sec":5100,"elapsed_seconds":4})"
      << "\n";
  std::filesystem::remove(TempPath("run.png"));
  ASSERT_TRUE(RunPlot({metrics, "--png"}).ok());
  EXPECT_TRUE(std::filesystem::exists(TempPath("run.png")));
  const std::string bad = TempPath("bad.jsonl");
  std::ofstream(bad) << "{\"event\":\"progress\",\"step\":1,\"loss\":1}\n{oops\n";
  absl::Status st = RunPlot({bad, "--png=" + TempPath("bad.png")});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find(bad + ":2:"), std::string::npos) << st;
  st = RunPlot({TempPath("missing.jsonl"), "--png"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find("missing.jsonl"), std::string::npos) << st;
  const std::string empty = TempPath("empty.jsonl");
  std::ofstream(empty) << "";
  st = RunPlot({empty, "--png"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find(empty + ": empty"), std::string::npos) << st;
}

}  // namespace
}  // namespace pstrain::launcher
