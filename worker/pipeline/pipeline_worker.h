// RunPipelineWorker: one worker process of pipeline mode (--mode=pipeline),
// from start to finish: join the cluster, find this worker's place (rank =
// (replica * stages + stage) * T + tp with T = --tensor_parallel), define
// every table of the job with the coordinator (the model's and its
// tensor-parallel slices; each worker then pulls and pushes only its own),
// cut the model, connect to the neighbouring stages and to its
// tensor-parallel group, train, evaluate, report, leave. On failure the
// neighbours are told why before it returns.
//
// A server failure (with checkpoints) is survived: on the coordinator's
// kRecover the stage stops talking to the servers and its waits on its
// neighbours fail, it drops its links, group and runner, waits for the
// cluster's recovery, builds them again under names of the new epoch and
// resumes from the restored checkpoint's step and data position.
#pragma once

#include "absl/status/status.h"
#include "common/transport.h"
#include "worker/pipeline/pipeline_trainer.h"
#include "worker/worker_app.h"

namespace pstrain::worker {

// The body of pipeline mode on top of a WorkerSession (worker/worker_app.h
// RunWorker calls it for --mode=pipeline). runtime.stage_result and
// print_result apply.
absl::Status RunPipelineWorker(const WorkerOptions& options, const WorkerRuntime& runtime = {});

}  // namespace pstrain::worker
