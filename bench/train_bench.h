// Training throughput: (a) local — the model alone in this process, no
// servers: in-memory synthetic batches, parameters bound once, TrainStep in
// a loop (the compute ceiling); (b) ps — one server and one worker over
// loopback running the real Trainer on a synthetic training file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_cluster.h"
#include "data/batch.h"
#include "model/models/model.h"

namespace pstrain::bench {

struct TrainBenchOptions {
  std::string model = "dlrm";
  // A model file's network (--model_file) instead of the built-in `model`.
  std::shared_ptr<const worker::graph::ModelGraph> model_graph;
  std::string device = "cpu";  // where the model computes: cpu | cuda
  // local: the batches are the first rows of these files read with this
  // schema file (e.g. `pstrain gen --history` data for DIN), instead of the
  // synthetic Criteo-layout world's; the model's columns are the schema's.
  std::vector<std::string> train_data;
  std::string schema_file;
  int batch_size = 1024;
  double seconds = 3.0;       // local: timed TrainStep loop
  int local_batches = 8;      // local: distinct batches cycled through
  int64_t train_rows = 300000;  // ps: rows in the training file
  int servers = 1;              // ps: parameter servers the worker's pulls and pushes split over
  std::string temp_dir;       // ps: where the file goes ("" = $TMPDIR or /tmp)
  StackOptions stack;           // ps: the transports
  // ps: the consistency model, and whether each step's push travels with
  // the next pull (TrainOptions::push_with_pull).
  proto::Consistency consistency = proto::Consistency::kAsp;
  bool push_with_pull = true;
  // Metrics serving (0: off): /metrics from this process (local) or from the
  // server (this port) and the worker (port + 1) (ps), -1 for free ports; a
  // scraper thread GETs every endpoint each scrape_seconds while training,
  // so the cost of serving is paid as Prometheus would make it paid.
  int metrics_port = 0;
  double scrape_seconds = 1.0;
};

struct TrainBenchResult {
  int64_t steps = 0;
  int64_t samples = 0;
  double seconds = 0;
  double samples_per_sec = 0;
  // ps only: where the worker's time went.
  double compute_seconds = 0;
  double wait_seconds = 0;
  double data_seconds = 0;
  double reader_rows_per_sec = 0;
  // With metrics_port: scrapes answered and failed, bytes of the last ones.
  int64_t scrapes = 0;
  int64_t scrape_failures = 0;
  int64_t scrape_bytes = 0;
  double scrape_seconds = 0;  // wall time of all the GETs together
  // CPU seconds of this whole process (every thread: in ps mode the
  // coordinator, server and worker too) while training: less sensitive to
  // other load on the machine than samples_per_sec.
  double cpu_seconds = 0;
  // ps only: the same CPU seconds by part of the job, from each thread's
  // own CPU time (/proc/self/task): "trainer" (the model's step, batch
  // planning, request encoding, gradients), "reader" (parsing the file),
  // "server" (the parameter server's request handling: decoding, row
  // lookups, optimizer apply, reply encoding), "server_io" and "worker_io"
  // (ZeroMQ's I/O threads: TCP send and receive, wake-ups), "worker_net"
  // (the worker's transport loop: replies it takes in for the trainer),
  // "coordinator", "other".
  std::vector<std::pair<std::string, double>> cpu_by_part;
  // ps only: the times the threads of each part blocked and were woken
  // again (voluntary context switches) while training.
  std::vector<std::pair<std::string, double>> wakeups_by_part;
};

// One synthetic batch bound for Model::TrainStep without servers: its
// sparse rows made by the tables' initializers, gradient space for every
// table. Dense tables point at the caller's weights.
struct LocalBatch {
  std::shared_ptr<const worker::Batch> batch;  // set by the caller
  worker::BatchPlan plan;
  std::vector<std::vector<float>> rows;   // by table id (sparse tables)
  std::vector<std::vector<float>> grads;  // by table id
  worker::ParamRefs params;
  worker::GradRefs grad_refs;
};

// Plans and binds `b->batch` for `model`; dense table t reads `dense[t]`
// (indexed by table id, which must outlive `b`).
absl::Status BindLocalBatch(const worker::Model& model, const std::vector<const float*>& dense,
                            LocalBatch* b);

absl::StatusOr<TrainBenchResult> RunTrainLocal(const TrainBenchOptions& options);
// The same training as ps mode without a parameter server: one process,
// the model's tables held in it (server/ps/tables: the same rows, index and
// optimizers), batches from the same kind of file through the same reader,
// each step's pulls and pushes called directly on the trainer's thread.
// The ps mode less this is what distributing the tables costs.
absl::StatusOr<TrainBenchResult> RunTrainTables(const TrainBenchOptions& options);
absl::StatusOr<TrainBenchResult> RunTrainPs(const TrainBenchOptions& options);

// What the tables and ps benches train on, read by a DataReader.
struct TrainInput {
  std::vector<std::string> patterns;
  worker::Schema schema;
  worker::ModelOptions model;  // options.model with its columns from `schema`
};
// options.train_data read with options.schema_file (text or Parquet), or
// options.train_rows synthetic rows for options.model written into a fresh
// folder under options.temp_dir ($TMPDIR, /tmp), set in `dir` as soon as it
// exists (the caller removes it).
absl::StatusOr<TrainInput> PrepareTrainInput(const TrainBenchOptions& options, std::string* dir);

}  // namespace pstrain::bench
