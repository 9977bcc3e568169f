// pstrain plot: training curves of one or several runs from their
// --metrics_out files, as one self-contained HTML page, a PNG or an SVG
// (drawn with cairo: no browser needed).
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/curves_chart.h"
#include "launcher/job_dir.h"
#include "launcher/plot_html.h"
#include "launcher/run_curves.h"

namespace pstrain::launcher {
namespace {

FlagSet PlotFlags() {
  FlagSet flags;
  flags.Define("out", "", "The HTML page to write (default curves.html when no --png or --svg).")
      .Define("png", "",
              "Also draw the curves into this PNG; bare --png: next to the first metrics file "
              "(run.jsonl -> run.png).")
      .Define("svg", "", "Likewise as an SVG (vector; bare --svg: run.svg).")
      .Define("width", "1200", "Width of the PNG/SVG in pixels (its height follows the panels).")
      .Define("job_dir", "", "A job's folder: plot its metrics file (see pstrain dashboard).")
      .Define("names", "", "Comma-separated legend names, one per file (default: file names).")
      .Define("title", "pstrain training curves", "Title of the page and the image.");
  return flags;
}

// The image path of `flag` (png or svg): the value, or for a bare flag the
// first metrics file with its extension replaced.
std::string ImagePath(const FlagSet& flags, const std::string& flag, const std::string& first) {
  std::string v = flags.Get(flag);
  if (v != "true") return v;
  std::string base = absl::EndsWith(first, ".jsonl") ? first.substr(0, first.size() - 6) : first;
  return absl::StrCat(base, ".", flag);
}

}  // namespace

std::string PlotHelp() {
  return absl::StrCat(
      "usage: pstrain plot METRICS.jsonl [MORE.jsonl ...] [--png[=curves.png]] "
      "[--svg[=curves.svg]] [--out=curves.html]\n"
      "       pstrain plot --job_dir=DIR --png\n\n"
      "Draws the training loss, throughput, eval AUC and eval logloss (and eval normalized\n"
      "entropy and calibration when the files have them) of one or several runs (files\n"
      "written by --metrics_out) over their steps, side by side. --png and --svg draw them\n"
      "with cairo into an image with axes, ticks and a legend; --out writes one\n"
      "self-contained HTML page with the curves and the runs' summaries (no network needed\n"
      "to view it). A file that is missing, empty or has a line that is not JSON is an error\n"
      "naming it (and the line): exit 2.\n\n",
      PlotFlags().Help());
}

absl::Status RunPlot(const std::vector<std::string>& argv) {
  FlagSet flags = PlotFlags();
  // Files are positional; flags take "--name=value" or "--name value", but
  // --png and --svg take a value only after '=' (bare: next to the file).
  std::vector<std::string> files, flag_args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0) {
      files.push_back(a);
    } else if (a.find('=') == std::string::npos && a != "--png" && a != "--svg" &&
               i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) {
      flag_args.push_back(a + "=" + argv[++i]);
    } else {
      flag_args.push_back(a);
    }
  }
  PS_RETURN_IF_ERROR(flags.Parse(flag_args, /*keep_unknown=*/false).status());
  if (!flags.Get("job_dir").empty()) {
    absl::StatusOr<std::string> metrics = FindMetricsFile(flags.Get("job_dir"));
    if (!metrics.ok()) return UsageError(metrics.status().message());
    files.push_back(*metrics);
  }
  if (files.empty()) return UsageError("no metrics files given (or --job_dir=DIR)");
  PS_ASSIGN_OR_RETURN(int64_t width, flags.GetInt("width"));
  if (width < 400 || width > 10000) return UsageError("--width must be between 400 and 10000");
  std::vector<std::string> names = absl::StrSplit(flags.Get("names"), ',', absl::SkipEmpty());
  if (!names.empty() && names.size() != files.size()) {
    return UsageError("--names needs one name per file");
  }
  if (names.empty()) names = DefaultRunNames(files);
  std::vector<RunCurves> runs;
  for (size_t i = 0; i < files.size(); ++i) {
    int cut = 0;
    absl::StatusOr<std::vector<RunCurves>> r = ReadRunCurves(files[i], names[i], &cut);
    if (!r.ok()) return UsageError(r.status().message());  // names the file (and line)
    if (cut > 0) {
      std::fprintf(stderr, "pstrain plot: %s: skipped its last line, cut short\n", files[i].c_str());
    }
    runs.insert(runs.end(), r->begin(), r->end());
  }
  const std::string title = flags.Get("title");
  const std::string png = ImagePath(flags, "png", files[0]);
  const std::string svg = ImagePath(flags, "svg", files[0]);
  std::string out = flags.Get("out");
  if (out.empty() && png.empty() && svg.empty()) out = "curves.html";
  if (!out.empty()) {
    PS_RETURN_IF_ERROR(WriteFileAtomically(out, PlotHtml(runs, title)));
    std::printf("wrote %s (%zu runs)\n", out.c_str(), runs.size());
  }
  if (!png.empty()) {
    PS_RETURN_IF_ERROR(WriteCurvesPng(runs, title, png, static_cast<int>(width)));
    std::printf("wrote %s (%zu runs)\n", png.c_str(), runs.size());
  }
  if (!svg.empty()) {
    PS_RETURN_IF_ERROR(WriteCurvesSvg(runs, title, svg, static_cast<int>(width)));
    std::printf("wrote %s (%zu runs)\n", svg.c_str(), runs.size());
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
