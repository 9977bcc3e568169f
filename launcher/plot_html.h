// Training curves after the fact: one self-contained HTML page with the
// curves of runs read from their --metrics_out files (launcher/
// run_curves.h) side by side (uPlot and the data inlined).
#pragma once

#include <string>
#include <vector>

#include "launcher/run_curves.h"

namespace pstrain::launcher {

// The page for `runs`, titled `title`.
std::string PlotHtml(const std::vector<RunCurves>& runs, const std::string& title);

}  // namespace pstrain::launcher
