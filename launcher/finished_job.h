// The dashboard's state (/api/state, as ClusterMonitor::StateJson gives it
// for a live job) of a job that has ended, from its metrics file and
// checkpoints: `pstrain dashboard --job_dir=DIR` serves the live
// dashboard's page with it. Its curves are over steps (x_label "step"),
// it has no nodes, and it adds the runs' summary and the file it came from.
#pragma once

#include <string>
#include <vector>

#include "launcher/job_dir.h"
#include "launcher/run_curves.h"

namespace pstrain::launcher {

// `runs` as read from `source`; each series thinned evenly to at most
// `max_points` (the newest point always kept).
std::string FinishedJobStateJson(const std::vector<RunCurves>& runs,
                                 const std::vector<JobCheckpoint>& checkpoints,
                                 const std::string& source, size_t max_points);

}  // namespace pstrain::launcher
