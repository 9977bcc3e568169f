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

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "common/transport.h"
#include "worker/pipeline/pipeline_trainer.h"
#include "worker/worker_app.h"

namespace pstrain::worker {

// How the worker is embedded. The defaults are those of a worker process;
// tests and benchmarks run several workers as threads of one process.
struct PipelineRuntime {
  // The transport of the worker's node (default: ZeroMQ).
  std::function<std::unique_ptr<Transport>()> make_transport;
  // Called when the coordinator stops the job (default: log and exit).
  std::function<void(const absl::Status&)> on_shutdown;
  // Filled with this stage's measurements on success (may be null).
  PipelineStageResult* result = nullptr;
  // Worker 0 prints a "RESULT model=... eval_auc=..." line on stdout.
  bool print_result = true;
};

absl::Status RunPipelineWorker(const WorkerOptions& options, const PipelineRuntime& runtime = {});

}  // namespace pstrain::worker
