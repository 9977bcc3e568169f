// RunWorker: one worker process from start to finish — join the cluster,
// define the model's tables, train, evaluate, report, leave.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport.h"
#include "worker/pipeline/pipeline_options.h"
#include "worker/trainer.h"

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
  // "ps": every table on the servers. "allreduce": dense tables replicated on
  // the workers, their gradients summed by a collective; sparse tables on the
  // servers. "pipeline": R pipelines of P stages, one worker per stage.
  std::string mode = "ps";
  size_t bucket_bytes = 25 << 20;   // allreduce gradient buckets
  bool overlap = true;              // allreduce buckets during the backward pass
  absl::Duration collective_timeout = absl::Seconds(60);
  // Serve Prometheus metrics at http://http_host:metrics_port/metrics (0: off).
  int metrics_port = 0;
  // KvClientOptions::push_partition_bytes: larger dense pushes go to a
  // server in pieces of at most this many bytes (0: one message).
  uint64_t push_partition_bytes = 1 << 20;
  std::string http_host = "0.0.0.0";
  // "pipeline" mode: stages, replicas, micro-batches, schedule.
  PipelineOptions pipeline;
  TrainOptions train;
  // CURVE keys of this node's connections (--auth=curve); empty: none.
  CurveKeys curve;
};

absl::Status RunWorker(const WorkerOptions& options);


}  // namespace pstrain::worker
