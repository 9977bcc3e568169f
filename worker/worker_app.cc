#include "worker/worker_app.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "common/status.h"
#include "common/zmq_transport.h"
#include "data/data_check.h"
#include "data/partition_stream.h"
#include "worker/pipeline/pipeline_worker.h"
#include "worker/ps/ps_worker.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {

WorkerSessionOptions SessionOptionsFor(const WorkerOptions& options, const WorkerRuntime& runtime) {
  WorkerSessionOptions s;
  s.coordinator = options.coordinator;
  s.bind = options.bind;
  s.advertise_host = options.advertise_host;
  s.rank = options.rank;
  s.connect_timeout = options.connect_timeout;
  s.node_id = options.node_id;
  s.coordinator_timeout = options.coordinator_timeout;
  s.exit_watchdog = options.exit_watchdog;
  s.kv.push_partition_bytes = options.push_partition_bytes;
  s.kv.pull_f16 = options.pull_f16;
  s.train_metrics = options.train.train_metrics;
  s.on_shutdown = runtime.on_shutdown;
  s.make_transport = runtime.make_transport;
  if (!s.make_transport) {
    ZmqTransportOptions to;
    to.name = "worker";
    to.curve = options.curve;
    s.make_transport = [to] { return std::make_unique<ZmqTransport>(to); };
  }
  return s;
}

absl::Status CheckWorkerData(const TrainOptions& train) {
  for (const auto& [patterns, flag] : {std::pair{&train.train_data, "--train_data"},
                                       std::pair{&train.eval_data, "--eval_data"}}) {
    if (patterns->empty()) continue;
    DataCheckOptions o;
    o.flag = flag;
    PS_RETURN_IF_ERROR(CheckDataFiles(*patterns, train.schema, o));
  }
  if (!train.train_stream.dir.empty()) {
    // The partitions there already (a later one is checked as it is read).
    PS_ASSIGN_OR_RETURN(std::vector<std::string> landed,
                        FirstPartitionFiles(train.train_stream, kStreamPartitionsChecked));
    DataCheckOptions o;
    o.flag = "--train_stream";
    if (!landed.empty()) PS_RETURN_IF_ERROR(CheckDataFiles(landed, train.schema, o));
  }
  return absl::OkStatus();
}

absl::Status RunWorker(const WorkerOptions& options, const WorkerRuntime& runtime) {
  // Before joining: a bad file ends this worker in a second, not the job
  // after training (the whole training set must hold rows; this worker's
  // shard of it may be empty).
  PS_RETURN_IF_ERROR(CheckWorkerData(options.train));
  // Live numbers for /metrics and the heartbeats (they outlive the session):
  // a stage's steps, samples and loss in pipeline mode too (its pipeline
  // statistics go to --metrics_out).
  metrics::Registry registry;
  TrainMetrics train_metrics(&registry);
  std::unique_ptr<http::HttpServer> metrics_http;
  if (options.metrics_port != 0) {
    PS_ASSIGN_OR_RETURN(metrics_http, metrics::StartMetricsServer(&registry, options.http_host,
                                                                  options.metrics_port));
    spdlog::info("metrics at {}/metrics", metrics_http->url());
  }
  WorkerOptions measured = options;
  measured.train.train_metrics = &train_metrics;
  if (options.mode == TrainMode::kPipeline) return RunPipelineWorker(measured, runtime);
  return RunPsWorker(measured, runtime);
}

}  // namespace pstrain::worker
