// RunPsWorker: the body of a worker in ps mode (every table on the servers)
// and in allreduce mode (dense tables replicated on the workers and summed
// by a collective among them; sparse tables on the servers), on top of a
// WorkerSession: the model on its device, the job's tables, elastic
// re-admission (ps mode), the allreduce group, and the Trainer, run again
// after each recovery of the cluster.
#pragma once

#include "absl/status/status.h"
#include "worker/worker_app.h"

namespace pstrain::worker {

// REQUIRES: options.mode is kPs or kAllreduce. Use RunWorker.
absl::Status RunPsWorker(const WorkerOptions& options, const WorkerRuntime& runtime);

}  // namespace pstrain::worker
