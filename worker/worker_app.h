// RunWorker: one worker from start to finish — join the cluster, define the
// model's tables, train, evaluate, report, leave — in the mode the options
// name (worker/ps/ps_worker.h: ps and allreduce; worker/pipeline/
// pipeline_worker.h: pipeline), each a body on top of one WorkerSession
// (worker/worker_session.h). A worker process or a thread of a test: the
// WorkerRuntime says which.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/train_mode.h"
#include "common/transport.h"
#include "worker/pipeline/pipeline_options.h"
#include "worker/trainer.h"
#include "worker/worker_session.h"

namespace pstrain::worker {

struct WorkerOptions {
  // A process of its own: once training ends, a teardown stuck for 10 s
  // ends the process (common/process.h ExitWithin). Off for in-process use.
  bool exit_watchdog = false;
  std::string coordinator;
  std::string bind = "tcp://0.0.0.0:0";
  std::string advertise_host;
  int32_t rank = -1;
  absl::Duration connect_timeout = absl::Seconds(60);
  // A stable identity (--node_id): the coordinator gives it the same rank
  // whenever it registers, so a restarted worker is re-admitted. Empty: none.
  std::string node_id;
  // How long a lost coordinator is waited for (WorkerSessionOptions).
  absl::Duration coordinator_timeout = absl::Seconds(120);
  // "ps": every table on the servers. "allreduce": dense tables replicated on
  // the workers, their gradients summed by a collective; sparse tables on the
  // servers. "pipeline": R pipelines of P stages, one worker per stage.
  TrainMode mode = TrainMode::kPs;
  size_t bucket_bytes = 25 << 20;   // allreduce gradient buckets
  bool overlap = true;              // allreduce buckets during the backward pass
  std::string allreduce_algorithm = "bcube";  // or "ring" (GlooOptions::Algorithm)
  absl::Duration collective_timeout = absl::Seconds(60);
  // Serve Prometheus metrics at http://http_host:metrics_port/metrics (0: off).
  int metrics_port = 0;
  // KvClientOptions::push_partition_bytes: larger dense pushes go to a
  // server in pieces of at most this many bytes (0: one message).
  uint64_t push_partition_bytes = 1 << 20;
  bool pull_f16 = false;  // KvClientOptions::pull_f16 (--pull_dtype=fp16)
  std::string http_host = "0.0.0.0";
  // "pipeline" mode: stages, replicas, micro-batches, schedule.
  PipelineOptions pipeline;
  TrainOptions train;
  // CURVE keys of this node's connections (--auth=curve); empty: none.
  CurveKeys curve;
};

struct PipelineStageResult;  // worker/pipeline/pipeline_trainer.h

// How the worker is embedded. The defaults are those of a worker process;
// tests and benchmarks run several workers as threads of one process.
struct WorkerRuntime {
  // The transport of the worker's node (default: ZeroMQ with options.curve).
  std::function<std::unique_ptr<Transport>()> make_transport;
  // The coordinator stopped the job (on the node's I/O thread). A worker
  // process exits here; by default (and when it returns) the worker stops
  // talking to the cluster and RunWorker returns the coordinator's reason.
  std::function<void(const absl::Status&)> on_shutdown;
  // Filled with the trainer's result on success (ps, allreduce; may be null).
  TrainResult* result = nullptr;
  // Filled with this stage's measurements on success (pipeline; may be null).
  PipelineStageResult* stage_result = nullptr;
  // Pipeline: worker 0 prints a "RESULT model=... eval_auc=..." line on
  // stdout (the Trainer's lead prints its own in ps and allreduce modes).
  bool print_result = true;
};

// Checks the job's data first (CheckWorkerData), then joins and trains.
absl::Status RunWorker(const WorkerOptions& options, const WorkerRuntime& runtime = {});

// The training and evaluation files exist, hold data and start with lines
// in the schema's format (data/data_check.h CheckDataFiles: every
// file, not only this worker's shard); InvalidArgument or NotFound naming
// the flag and the file.
absl::Status CheckWorkerData(const TrainOptions& train);

// The session of the worker that `options` and `runtime` describe (for the
// mode bodies).
WorkerSessionOptions SessionOptionsFor(const WorkerOptions& options, const WorkerRuntime& runtime);

}  // namespace pstrain::worker
