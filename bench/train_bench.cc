#include "bench/train_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "bench/bench_cluster.h"
#include "bench/bench_util.h"
#include "common/optim/initializer.h"
#include "worker/data/synthetic.h"
#include "worker/models/model.h"
#include "worker/trainer.h"

namespace pstrain::bench {
namespace {

worker::ModelOptions ModelFor(const TrainBenchOptions& o) {
  worker::ModelOptions m;  // the model's defaults (dlrm: 13 dense, 26 sparse, dim 16)
  m.name = o.model;
  return m;
}

worker::Schema SchemaFor(const worker::ModelOptions& m) {
  worker::Schema s;
  s.num_dense = m.num_dense;
  s.num_sparse = m.num_sparse;
  return s;
}

worker::SyntheticOptions WorldFor(const worker::ModelOptions& m, int64_t rows) {
  worker::SyntheticOptions w;
  w.rows = rows;
  w.num_dense = m.num_dense;
  w.num_sparse = m.num_sparse;
  return w;
}

// Parameters of one bound batch: sparse rows gathered for its plan and
// gradient space; dense tables are shared by all batches.
struct BoundBatch {
  std::shared_ptr<const worker::Batch> batch;
  worker::BatchPlan plan;
  std::vector<std::vector<float>> rows;   // by table id (sparse tables)
  std::vector<std::vector<float>> grads;  // by table id
  worker::ParamRefs params;
  worker::GradRefs grad_refs;
};

absl::Status Bind(const worker::Model& model, const std::vector<std::vector<float>>& dense,
                  BoundBatch* b) {
  const auto& tables = model.tables();
  model.Plan(*b->batch, &b->plan);
  b->rows.resize(tables.size());
  b->grads.resize(tables.size());
  b->params.tables.assign(tables.size(), nullptr);
  b->grad_refs.tables.assign(tables.size(), nullptr);
  for (const TableSpec& t : tables) {
    if (t.kind == TableKind::kDense) {
      b->params.tables[t.id] = dense[t.id].data();
      b->grads[t.id].resize(t.size);
    }
  }
  const auto& sparse = model.sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) {
    const TableSpec& t = tables[sparse[k]];
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(t.init, t.id));
    const auto& ids = b->plan.lookups[k].unique_ids;
    b->rows[t.id].resize(ids.size() * t.dim);
    for (size_t i = 0; i < ids.size(); ++i) init.FillRow(ids[i], &b->rows[t.id][i * t.dim], t.dim);
    b->params.tables[t.id] = b->rows[t.id].data();
    b->grads[t.id].resize(ids.size() * t.dim);
  }
  for (const TableSpec& t : tables) b->grad_refs.tables[t.id] = b->grads[t.id].data();
  return absl::OkStatus();
}

// Sends stdout to stderr while alive: the Trainer prints a human "RESULT"
// line on stdout, which must not mix with the bench's JSON lines.
class StdoutToStderr {
 public:
  StdoutToStderr() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    if (saved_ >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutToStderr() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      dup2(saved_, STDOUT_FILENO);
      close(saved_);
    }
  }

 private:
  int saved_ = -1;
};

absl::StatusOr<worker::TrainResult> TrainAgainst(const std::string& coordinator,
                                                 const worker::TrainOptions& train,
                                                 const StackOptions& stack) {
  std::string endpoint;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<RpcNode> node, StartWorkerNode("worker", stack, &endpoint));
  CoordinatorClientOptions co;
  co.coordinator = coordinator;
  co.role = proto::Role::kWorker;
  co.requested_rank = 0;
  co.endpoint = endpoint;
  CoordinatorClient coord(node.get(), co);
  PS_RETURN_IF_ERROR(coord.Register().status());
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, coord.WaitForCluster(absl::Seconds(60)));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(train.model));
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      coord.DefineTables(model->tables(), absl::Seconds(60)));
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  worker::KvClientOptions ko;
  ko.rank = coord.rank();
  worker::KvClient kv(node.get(), layout, servers, ko);
  absl::StatusOr<worker::TrainResult> result;
  {
    StdoutToStderr redirect;
    worker::Trainer trainer(train, model.get(), &kv, &coord, coord.rank(), view.num_workers);
    result = trainer.Run();
  }
  absl::Status done = coord.WorkerDone();
  node->Stop();
  if (result.ok() && !done.ok()) return done;
  return result;
}

}  // namespace

absl::StatusOr<TrainBenchResult> RunTrainLocal(const TrainBenchOptions& options) {
  worker::ModelOptions mo = ModelFor(options);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(mo));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::SyntheticWorld> world,
                      worker::SyntheticWorld::Create(WorldFor(mo, 0)));
  const auto& tables = model->tables();
  std::vector<std::vector<float>> dense(tables.size());
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense) continue;
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(t.init, t.id));
    dense[t.id].resize(t.size);
    init.FillRange(0, dense[t.id].data(), t.size);
  }
  std::vector<BoundBatch> batches(std::max(1, options.local_batches));
  for (size_t k = 0; k < batches.size(); ++k) {
    PS_ASSIGN_OR_RETURN(batches[k].batch,
                        worker::GenerateBatch(*world, static_cast<int64_t>(k) * options.batch_size,
                                              options.batch_size, SchemaFor(mo)));
    PS_RETURN_IF_ERROR(Bind(*model, dense, &batches[k]));
  }
  auto step = [&](BoundBatch& b) -> absl::StatusOr<worker::StepOutput> {
    return model->TrainStep(*b.batch, b.plan, b.params, &b.grad_refs);
  };
  for (BoundBatch& b : batches) PS_RETURN_IF_ERROR(step(b).status());  // warm-up
  TrainBenchResult r;
  const auto start = Clock::now();
  for (size_t k = 0; SecondsSince(start) < options.seconds; ++k) {
    PS_ASSIGN_OR_RETURN(worker::StepOutput out, step(batches[k % batches.size()]));
    r.samples += out.num_samples;
    ++r.steps;
  }
  r.seconds = SecondsSince(start);
  r.samples_per_sec = r.samples / r.seconds;
  return r;
}

absl::StatusOr<TrainBenchResult> RunTrainPs(const TrainBenchOptions& options) {
  worker::ModelOptions mo = ModelFor(options);
  std::string base = options.temp_dir;
  if (base.empty()) {
    const char* env = std::getenv("TMPDIR");
    base = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  std::string dir_template = absl::StrCat(base, "/pstrain_bench.XXXXXX");
  if (mkdtemp(dir_template.data()) == nullptr) {
    return ErrnoToStatus(errno, absl::StrCat("mkdtemp ", dir_template));
  }
  const std::string dir = dir_template;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{dir};
  const std::string path = dir + "/train.tsv";
  PS_ASSIGN_OR_RETURN(worker::SyntheticReport report,
                      worker::WriteSynthetic(WorldFor(mo, options.train_rows), path));
  spdlog::info("train ps: wrote {} rows ({:.1f} MB) in {:.1f}s", report.rows, report.bytes / 1e6,
               report.seconds);

  BenchClusterOptions co;
  co.servers = 1;
  co.workers = 1;
  co.local_workers = 0;  // the Trainer below joins as worker 0
  co.stack = options.stack;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(co));

  worker::TrainOptions train;
  train.model = mo;
  train.schema = SchemaFor(mo);
  train.train_data = {path};
  train.batch_size = options.batch_size;
  train.epochs = 1;
  train.log_every = absl::Hours(1);
  absl::StatusOr<worker::TrainResult> tr = TrainAgainst(cluster->coordinator_endpoint(), train, options.stack);
  // On failure the worker may not have reported done: the cluster's
  // destructor stops everything instead.
  PS_RETURN_IF_ERROR(tr.status());
  PS_RETURN_IF_ERROR(cluster->Finish());
  TrainBenchResult r;
  r.steps = tr->steps;
  r.samples = tr->samples;
  r.seconds = tr->train_seconds;
  r.samples_per_sec = tr->train_seconds > 0 ? tr->samples / tr->train_seconds : 0;
  r.compute_seconds = tr->compute_seconds;
  r.wait_seconds = tr->wait_seconds;
  r.data_seconds = tr->data_seconds;
  r.reader_rows_per_sec = tr->reader_rows_per_sec;
  return r;
}

}  // namespace pstrain::bench
