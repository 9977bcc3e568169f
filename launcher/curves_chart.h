// The curves of runs (launcher/run_curves.h) as a still image, drawn with
// cairo: training loss and throughput over steps, eval AUC and logloss
// (and normalized entropy and calibration when the files have them), one
// panel each with axes, ticks and labels, one colour per run. PNG for
// sharing, SVG for print; neither needs a browser.
// Pure functions of their inputs; thread-safe (each call has its own
// cairo surface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/run_curves.h"

namespace pstrain::launcher {

// Where things land in the image (pixels; y grows downwards).
struct ChartLayout {
  struct Panel {
    std::string title, y_label;
    double left = 0, top = 0, right = 0, bottom = 0;  // the plot area
    double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
    bool empty = true;  // no run has a point in it
    double X(double x) const { return left + (x - x_min) / (x_max - x_min) * (right - left); }
    double Y(double y) const { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); }
  };
  int width = 0, height = 0;
  std::vector<Panel> panels;
};

// The layout of the image of `runs`, `width` pixels wide.
ChartLayout LayoutCurves(const std::vector<RunCurves>& runs, int width = 1200);

// The colour of run `i`, 0xRRGGBB (the page's palette, charts.js).
uint32_t RunColor(size_t i);

// Nice tick values covering [lo, hi] (steps of 1, 2 or 5 x 10^k), about
// `target` of them.
std::vector<double> NiceTicks(double lo, double hi, int target = 6);

// Writes the image to `path` (replaced atomically). Errors name the file.
absl::Status WriteCurvesPng(const std::vector<RunCurves>& runs, const std::string& title,
                            const std::string& path, int width = 1200);
absl::Status WriteCurvesSvg(const std::vector<RunCurves>& runs, const std::string& title,
                            const std::string& path, int width = 1200);

}  // namespace pstrain::launcher
