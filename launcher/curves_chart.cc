#include "launcher/curves_chart.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace pstrain::launcher {
namespace {

constexpr int kMargin = 24;        // around and between panels
constexpr int kHeader = 104;       // title, files, legend
constexpr int kPanelHeight = 330;
constexpr const char* kFont = "DejaVu Sans";

// What a panel draws: y over x of every run.
struct PanelSpec {
  const char* title;
  const char* y_label;
  std::vector<double> RunCurves::*x;
  std::vector<double> RunCurves::*y;
  bool points;       // eval curves: few points, each marked
  double reference;  // a dashed line at this y (NaN: none)
  bool from_zero;    // the y axis starts at 0 (rates)
};

std::vector<PanelSpec> PanelsFor(const std::vector<RunCurves>& runs) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  std::vector<PanelSpec> p = {
      {"Training loss", "loss", &RunCurves::step, &RunCurves::loss, false, none, false},
      {"Throughput (worker 0's view of the job)", "samples/s", &RunCurves::step,
       &RunCurves::samples_per_sec, false, none, true},
      {"Eval AUC", "AUC", &RunCurves::eval_step, &RunCurves::eval_auc, true, none, false},
      {"Eval logloss", "logloss", &RunCurves::eval_step, &RunCurves::eval_logloss, true, none,
       false}};
  if (AnyValue(runs, &RunCurves::eval_ne)) {
    p.push_back({"Eval normalized entropy (below 1 beats the base rate)", "NE",
                 &RunCurves::eval_step, &RunCurves::eval_ne, true, 1.0, false});
  }
  if (AnyValue(runs, &RunCurves::eval_calibration)) {
    p.push_back({"Eval calibration (mean prediction / positive rate)", "calibration",
                 &RunCurves::eval_step, &RunCurves::eval_calibration, true, 1.0, false});
  }
  return p;
}

// [lo, hi] of the finite values, widened when empty or flat.
void Range(double* lo, double* hi, bool pad) {
  if (!(*lo <= *hi)) {
    *lo = 0;
    *hi = 1;
  } else if (*lo == *hi) {
    const double d = *lo == 0 ? 1 : std::fabs(*lo) * 0.05;
    *lo -= d;
    *hi += d;
  } else if (pad) {
    const double d = (*hi - *lo) * 0.06;
    *lo -= d;
    *hi += d;
  }
}

// "1.5M", "120k", "0.705", "20".
std::string TickLabel(double v, double step) {
  if (std::fabs(v) < step * 1e-6) v = 0;
  const double a = std::fabs(v);
  if (a >= 1e6) return absl::StrFormat("%gM", std::round(v / 1e4) / 100);
  if (a >= 1e4) return absl::StrFormat("%gk", std::round(v / 10) / 100);
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return absl::StrFormat("%.*f", decimals, v);
}

void SetColor(cairo_t* cr, uint32_t rgb, double alpha = 1) {
  cairo_set_source_rgba(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
                        (rgb & 255) / 255.0, alpha);
}

void Text(cairo_t* cr, double x, double y, const std::string& s, double size, bool bold,
          uint32_t rgb, double align = 0) {  // align: 0 left, 0.5 centre, 1 right
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  SetColor(cr, rgb);
  cairo_move_to(cr, x - align * e.x_advance, y);
  cairo_show_text(cr, s.c_str());
}

void DrawPanel(cairo_t* cr, const ChartLayout::Panel& p, const PanelSpec& spec,
               const std::vector<RunCurves>& runs) {
  const double box_left = p.left - 74, box_top = p.top - 40;
  const double box_right = p.right + 14, box_bottom = p.bottom + 50;
  cairo_set_line_width(cr, 1);
  SetColor(cr, 0xe0e0e0);
  cairo_rectangle(cr, box_left + 0.5, box_top + 0.5, box_right - box_left, box_bottom - box_top);
  cairo_stroke(cr);
  Text(cr, box_left + 12, box_top + 22, spec.title, 14, true, 0x222222);
  if (p.empty) {
    Text(cr, (p.left + p.right) / 2, (p.top + p.bottom) / 2, "no data in these files", 13, false,
         0x888888, 0.5);
    return;
  }
  // Grid and tick labels.
  const std::vector<double> xt = NiceTicks(p.x_min, p.x_max), yt = NiceTicks(p.y_min, p.y_max);
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1, ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : yt) {
    const double y = std::round(p.Y(v)) + 0.5;
    SetColor(cr, 0xececec);
    cairo_move_to(cr, p.left, y);
    cairo_line_to(cr, p.right, y);
    cairo_stroke(cr);
    Text(cr, p.left - 8, y + 4, TickLabel(v, ys), 11, false, 0x444444, 1);
  }
  for (double v : xt) {
    const double x = std::round(p.X(v)) + 0.5;
    SetColor(cr, 0xececec);
    cairo_move_to(cr, x, p.top);
    cairo_line_to(cr, x, p.bottom);
    cairo_stroke(cr);
    SetColor(cr, 0x888888);
    cairo_move_to(cr, x, p.bottom);
    cairo_line_to(cr, x, p.bottom + 5);
    cairo_stroke(cr);
    Text(cr, x, p.bottom + 19, TickLabel(v, xs), 11, false, 0x444444, 0.5);
  }
  SetColor(cr, 0x888888);
  cairo_rectangle(cr, p.left + 0.5, p.top + 0.5, p.right - p.left, p.bottom - p.top);
  cairo_stroke(cr);
  Text(cr, (p.left + p.right) / 2, p.bottom + 38, "step", 12, false, 0x444444, 0.5);
  cairo_save(cr);
  cairo_translate(cr, box_left + 18, (p.top + p.bottom) / 2);
  cairo_rotate(cr, -M_PI / 2);
  Text(cr, 0, 0, p.y_label, 12, false, 0x444444, 0.5);
  cairo_restore(cr);
  // The curves, clipped to the plot area.
  cairo_save(cr);
  cairo_rectangle(cr, p.left, p.top, p.right - p.left, p.bottom - p.top);
  cairo_clip(cr);
  if (std::isfinite(spec.reference) && spec.reference > p.y_min && spec.reference < p.y_max) {
    const double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    SetColor(cr, 0x777777);
    cairo_move_to(cr, p.left, p.Y(spec.reference));
    cairo_line_to(cr, p.right, p.Y(spec.reference));
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::vector<double>& xv = runs[r].*spec.x;
    const std::vector<double>& yv = runs[r].*spec.y;
    SetColor(cr, RunColor(r));
    cairo_set_line_width(cr, 2);
    bool started = false;
    for (size_t i = 0; i < std::min(xv.size(), yv.size()); ++i) {
      if (!std::isfinite(xv[i]) || !std::isfinite(yv[i])) continue;  // lines span gaps
      (started ? cairo_line_to : cairo_move_to)(cr, p.X(xv[i]), p.Y(yv[i]));
      started = true;
    }
    cairo_stroke(cr);
    if (!spec.points) continue;
    for (size_t i = 0; i < std::min(xv.size(), yv.size()); ++i) {
      if (!std::isfinite(xv[i]) || !std::isfinite(yv[i])) continue;
      cairo_new_sub_path(cr);
      cairo_arc(cr, p.X(xv[i]), p.Y(yv[i]), 3.5, 0, 2 * M_PI);
    }
    cairo_fill(cr);
  }
  cairo_restore(cr);
}

void Draw(cairo_t* cr, const ChartLayout& layout, const std::vector<RunCurves>& runs,
          const std::string& title) {
  SetColor(cr, 0xffffff);
  cairo_paint(cr);
  Text(cr, kMargin, 34, title, 20, true, 0x222222);
  std::vector<std::string> files;
  for (const RunCurves& r : runs) files.push_back(r.file);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  Text(cr, kMargin, 56, absl::StrJoin(files, " · "), 12, false, 0x666666);
  double x = kMargin;  // the legend
  for (size_t r = 0; r < runs.size(); ++r) {
    SetColor(cr, RunColor(r));
    cairo_rectangle(cr, x, 74, 22, 4);
    cairo_fill(cr);
    Text(cr, x + 28, 81, runs[r].name, 13, false, 0x222222);
    cairo_text_extents_t e;
    cairo_text_extents(cr, runs[r].name.c_str(), &e);
    x += 28 + e.x_advance + 22;
  }
  const std::vector<PanelSpec> specs = PanelsFor(runs);
  for (size_t i = 0; i < specs.size(); ++i) DrawPanel(cr, layout.panels[i], specs[i], runs);
}

absl::Status CairoError(cairo_status_t st, const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat("cannot write ", what, " ", path, ": ", cairo_status_to_string(st)));
}

}  // namespace

uint32_t RunColor(size_t i) {
  static constexpr uint32_t kColors[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
                                         0x8c564b, 0xe377c2, 0x17becf, 0x7f7f7f, 0xbcbd22};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1) return ticks;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw * (1 - 1e-9)) break;
  }
  const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
  for (double k = first; k <= last; ++k) ticks.push_back(k == 0 ? 0 : k * step);
  return ticks;
}

ChartLayout LayoutCurves(const std::vector<RunCurves>& runs, int width) {
  ChartLayout layout;
  layout.width = width;
  const std::vector<PanelSpec> specs = PanelsFor(runs);
  const int rows = static_cast<int>((specs.size() + 1) / 2);
  layout.height = kHeader + rows * (kPanelHeight + kMargin);
  const double panel_width = (width - 3.0 * kMargin) / 2;
  for (size_t i = 0; i < specs.size(); ++i) {
    ChartLayout::Panel p;
    p.title = specs[i].title;
    p.y_label = specs[i].y_label;
    const double left = kMargin + (i % 2) * (panel_width + kMargin);
    const double top = kHeader + (i / 2) * (kPanelHeight + kMargin);
    p.left = left + 74;
    p.right = left + panel_width - 14;
    p.top = top + 40;
    p.bottom = top + kPanelHeight - 50;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (const RunCurves& r : runs) {
      const std::vector<double>& xv = r.*specs[i].x;
      const std::vector<double>& yv = r.*specs[i].y;
      for (size_t k = 0; k < std::min(xv.size(), yv.size()); ++k) {
        if (!std::isfinite(xv[k]) || !std::isfinite(yv[k])) continue;
        p.empty = false;
        x0 = std::min(x0, xv[k]);
        x1 = std::max(x1, xv[k]);
        y0 = std::min(y0, yv[k]);
        y1 = std::max(y1, yv[k]);
      }
    }
    // Steps from 0; the last eval's point off the frame.
    if (x0 > 0 && x0 < x1) x0 = 0;
    if (specs[i].points && x1 > x0) x1 += (x1 - x0) * 0.04;
    const bool zero = specs[i].from_zero && y0 >= 0 && y1 > 0;
    if (zero) y0 = 0;
    Range(&x0, &x1, /*pad=*/false);
    Range(&y0, &y1, /*pad=*/true);
    if (zero) y0 = 0;  // padded above only
    p.x_min = x0;
    p.x_max = x1;
    p.y_min = y0;
    p.y_max = y1;
    layout.panels.push_back(std::move(p));
  }
  return layout;
}

absl::Status WriteCurvesPng(const std::vector<RunCurves>& runs, const std::string& title,
                            const std::string& path, int width) {
  const ChartLayout layout = LayoutCurves(runs, width);
  cairo_surface_t* surface =
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, layout.width, layout.height);
  cairo_t* cr = cairo_create(surface);
  Draw(cr, layout, runs, title);
  cairo_status_t st = cairo_status(cr);
  cairo_destroy(cr);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(surface, tmp.c_str());
  cairo_surface_destroy(surface);
  if (st != CAIRO_STATUS_SUCCESS) {
    std::remove(tmp.c_str());
    return CairoError(st, "the PNG", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return ErrnoToStatus(err, absl::StrCat("rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteCurvesSvg(const std::vector<RunCurves>& runs, const std::string& title,
                            const std::string& path, int width) {
  const ChartLayout layout = LayoutCurves(runs, width);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  cairo_surface_t* surface = cairo_svg_surface_create(tmp.c_str(), layout.width, layout.height);
  cairo_t* cr = cairo_create(surface);
  Draw(cr, layout, runs, title);
  cairo_status_t st = cairo_status(cr);
  cairo_destroy(cr);
  cairo_surface_finish(surface);  // writes the file
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (st != CAIRO_STATUS_SUCCESS) {
    std::remove(tmp.c_str());
    return CairoError(st, "the SVG", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return ErrnoToStatus(err, absl::StrCat("rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
