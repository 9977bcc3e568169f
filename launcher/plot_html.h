// Training curves after the fact: reads --metrics_out files (JSON lines:
// progress, eval and summary records) and writes one self-contained HTML
// page with their curves side by side (uPlot and the data inlined).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

struct RunCurves {
  std::string name;  // legend label
  std::string file;
  std::vector<double> step, loss, samples_per_sec, elapsed;  // progress lines
  std::vector<double> eval_step, eval_auc, eval_logloss;      // eval lines
  std::string summary_json = "null";                          // the summary line, or null
};

// The runs in one metrics file. A file appended to by several runs (the
// steps start again, or lines follow a summary) gives one run each, named
// `name`, `name #2`, ... Malformed lines are skipped and counted in
// `*bad_lines` (may be null). NotFound / InvalidArgument (no record at all).
absl::StatusOr<std::vector<RunCurves>> ReadRunCurves(const std::string& path,
                                                     const std::string& name, int* bad_lines);

// The page for `runs`, titled `title`.
std::string PlotHtml(const std::vector<RunCurves>& runs, const std::string& title);

// Legend names for `paths`: the file names without .jsonl when they differ,
// otherwise the paths.
std::vector<std::string> DefaultRunNames(const std::vector<std::string>& paths);

}  // namespace pstrain::launcher
