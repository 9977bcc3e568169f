// The curves of finished runs, read back from their --metrics_out files
// (JSON lines of progress, eval and summary records): what `pstrain plot`
// draws and `pstrain dashboard --job_dir` serves.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

struct RunCurves {
  std::string name;  // legend label
  std::string file;
  std::vector<double> step, loss, samples_per_sec, elapsed;  // progress lines
  // Eval lines; NaN where a line lacks the field (eval_ne and
  // eval_calibration are newer than the others).
  std::vector<double> eval_step, eval_auc, eval_logloss, eval_ne, eval_calibration, eval_elapsed;
  // A model of several heads: each head's "<head>.eval_auc" and
  // ".eval_logloss" (a regression head has no AUC), by eval line (NaN where
  // a line lacks it), heads in their first line's order.
  struct Head {
    std::string name;
    std::vector<double> auc, logloss;
  };
  std::vector<Head> heads;
  std::string summary_json = "null";  // the summary line, or null
};

// The runs in one metrics file. A file appended to by several runs (the
// steps start again, or lines follow a summary) gives one run each, named
// `name`, `name #2`, ... Lines of other events or without one are ignored,
// and so are unknown fields. A last line cut short (no newline: a job that
// was killed while writing it) is skipped and counted in `*skipped` (may be
// null). Errors name the file, and the line where there is one: NotFound
// (no such file), InvalidArgument (empty, a line that is not a JSON object,
// no record at all).
absl::StatusOr<std::vector<RunCurves>> ReadRunCurves(const std::string& path,
                                                     const std::string& name, int* skipped);

// Legend names for `paths`: the file names without .jsonl when they differ,
// otherwise the paths.
std::vector<std::string> DefaultRunNames(const std::vector<std::string>& paths);

// True when some run has a finite value in `curve` (a member pointer such
// as &RunCurves::eval_ne).
bool AnyValue(const std::vector<RunCurves>& runs, std::vector<double> RunCurves::*curve);

}  // namespace pstrain::launcher
