// `pstrain_bench train --mode=tables`: the ps mode's training without a
// parameter server (see RunTrainTables in train_bench.h).
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/train_bench.h"
#include "common/metrics/process_metrics.h"
#include "common/status.h"
#include "data/reader.h"
#include "model/models/model.h"
#include "server/ps/tables/dense_shard.h"
#include "server/ps/tables/sparse_table.h"
#include "worker/pipeline/stage_runner.h"

namespace pstrain::bench {
namespace {

// The model's tables in this process: a sparse table or a whole dense
// shard for each table id.
struct LocalTables {
  std::vector<std::unique_ptr<server::SparseTable>> sparse;
  std::vector<std::unique_ptr<server::DenseShard>> dense;
};

absl::StatusOr<LocalTables> CreateTables(const worker::Model& model) {
  LocalTables t;
  t.sparse.resize(model.tables().size());
  t.dense.resize(model.tables().size());
  for (const TableSpec& spec : model.tables()) {
    if (spec.kind == TableKind::kSparse) {
      PS_ASSIGN_OR_RETURN(t.sparse[spec.id], server::SparseTable::Create(spec));
    } else {
      PS_ASSIGN_OR_RETURN(t.dense[spec.id], server::DenseShard::Create(spec, 0, spec.size));
    }
  }
  return t;
}

}  // namespace

absl::StatusOr<TrainBenchResult> RunTrainTables(const TrainBenchOptions& options) {
  std::string dir;
  absl::StatusOr<TrainInput> input = PrepareTrainInput(options, &dir);
  RemoveDirOnExit cleanup{dir};
  PS_RETURN_IF_ERROR(input.status());

  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(input->model));
  PS_ASSIGN_OR_RETURN(LocalTables tables, CreateTables(*model));
  const auto& specs = model->tables();
  const auto& sparse = model->sparse_tables();

  worker::ReaderOptions ro;
  ro.patterns = input->patterns;
  ro.schema = input->schema;
  ro.batch_size = options.batch_size;
  ro.epochs = 1;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::DataReader> reader,
                      worker::DataReader::Open(std::move(ro)));

  std::vector<std::vector<float>> rows(specs.size());
  std::vector<std::vector<float>> grads(specs.size());
  for (const TableSpec& spec : specs) {
    if (spec.kind == TableKind::kDense) grads[spec.id].resize(spec.size);
  }
  worker::BatchPlan plan;
  worker::ParamRefs params;
  worker::GradRefs grad_refs;
  params.tables.assign(specs.size(), nullptr);
  grad_refs.tables.assign(specs.size(), nullptr);

  TrainBenchResult r;
  double table_seconds = 0;  // the trainer thread's pulls and pushes
  const double cpu0 = metrics::ReadProcessUsage().cpu_seconds;
  const double thread0 = worker::ThreadCpuSeconds();
  const auto start = Clock::now();
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const worker::Batch> batch, reader->Next());
    if (batch == nullptr) break;
    model->Plan(*batch, &plan);
    auto t0 = Clock::now();
    for (size_t k = 0; k < sparse.size(); ++k) {
      const uint32_t t = sparse[k];
      const std::vector<uint64_t>& ids = plan.lookups[k].unique_ids;
      rows[t].resize(ids.size() * specs[t].dim);
      grads[t].resize(rows[t].size());
      PS_RETURN_IF_ERROR(tables.sparse[t]->Pull(ids, rows[t].data()));
      params.tables[t] = rows[t].data();
    }
    for (const TableSpec& spec : specs) {
      if (spec.kind == TableKind::kDense) params.tables[spec.id] = tables.dense[spec.id]->weights().data();
      grad_refs.tables[spec.id] = grads[spec.id].data();
    }
    table_seconds += SecondsSince(t0);
    PS_ASSIGN_OR_RETURN(worker::StepOutput out,
                        model->TrainStep(*batch, plan, params, &grad_refs));
    // The parameter server's scale: the gradient is the batch's sum.
    const float scale = 1.0f / static_cast<float>(out.num_samples);
    t0 = Clock::now();
    for (size_t k = 0; k < sparse.size(); ++k) {
      const uint32_t t = sparse[k];
      PS_RETURN_IF_ERROR(tables.sparse[t]->Push(plan.lookups[k].unique_ids, grads[t].data(), scale));
    }
    for (const TableSpec& spec : specs) {
      if (spec.kind == TableKind::kDense) {
        PS_RETURN_IF_ERROR(tables.dense[spec.id]->Push(0, grads[spec.id], scale));
      }
    }
    table_seconds += SecondsSince(t0);
    r.samples += out.num_samples;
    ++r.steps;
  }
  r.seconds = SecondsSince(start);
  r.cpu_seconds = metrics::ReadProcessUsage().cpu_seconds - cpu0;
  const double trainer = worker::ThreadCpuSeconds() - thread0;
  r.samples_per_sec = r.seconds > 0 ? r.samples / r.seconds : 0;
  // The trainer thread's CPU split by wall time (it does not wait inside
  // the table calls); everything else in the process is the reader.
  r.cpu_by_part = {{"model", trainer - table_seconds},
                   {"tables", table_seconds},
                   {"reader", r.cpu_seconds - trainer}};
  return r;
}

}  // namespace pstrain::bench
