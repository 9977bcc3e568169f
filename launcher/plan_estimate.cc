#include "launcher/plan_estimate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/optim/optimizer.h"
#include "common/status.h"
#include "model/nn/blas.h"
#include "worker/pipeline/pipeline_model.h"
#include "worker/pipeline/tensor_parallel.h"

namespace pstrain::launcher {
namespace {

using worker::LinearSpec;
using worker::TpSplit;

constexpr double kFloat = 4;

// Bytes a ring all-reduce of `bytes` sends and receives on each of T ranks.
double RingBytes(double bytes, int tp) { return tp > 1 ? 4.0 * (tp - 1) / tp * bytes : 0; }

struct WorkerCost {
  double pulled = 0, pushed = 0;  // dense floats
  double sparse_floats = 0;       // embedding rows of a step (stage 0)
  double acts = 0;                // floats
  double flops = 0;
  double comm_pipe = 0, comm_tp = 0, comm_ps = 0;
};

}  // namespace

absl::StatusOr<LayoutEstimate> EstimateLayout(const PlanInputs& in, int replicas, int stages,
                                              int tp, int microbatches) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(in.model));
  PS_ASSIGN_OR_RETURN(worker::PipelineModelSpec spec,
                      worker::DescribePipelineModel(in.model, *model, in.batch_size));
  // --stage_layers applies to the layouts with as many stages as it has ranges.
  const bool ranges = !in.stage_layers.empty() &&
                      std::count(in.stage_layers.begin(), in.stage_layers.end(), ',') + 1 == stages;
  PS_ASSIGN_OR_RETURN(worker::StagePartition partition,
                      worker::PartitionTower(spec, stages, ranges ? in.stage_layers : ""));
  PS_ASSIGN_OR_RETURN(worker::TensorParallelLayout layout,
                      worker::TensorParallelLayout::Create(model->tables(), spec, partition, tp));
  const auto& tables = layout.tables();
  LayoutEstimate e;
  e.replicas = replicas;
  e.stages = stages;
  e.tp = tp;
  e.microbatches = microbatches;
  e.baseline = in.baseline_bytes;
  const int b = in.batch_size;
  const double mb_rows = std::ceil(static_cast<double>(b) / microbatches);

  // The head's dense tables: the model's dense tables outside the tower.
  std::set<uint32_t> tower_tables;
  for (const LinearSpec& l : spec.tower) tower_tables.insert({l.weight, l.bias});
  double head_floats = 0;
  for (const TableSpec& t : model->tables()) {
    if (t.kind == TableKind::kDense && tower_tables.count(t.id) == 0) head_floats += t.size;
  }
  // Embedding rows of a step: at most one per id of the batch.
  double sparse_floats = 0;
  for (uint32_t s : model->sparse_tables()) sparse_floats += static_cast<double>(b) * tables[s].dim;

  bool any_split = false;
  double max_stage_flops = 0;
  WorkerCost worst;
  double worst_bytes = -1;
  for (int s = 0; s < stages; ++s) {
    for (int t = 0; t < tp; ++t) {
      WorkerCost c;
      const std::vector<LinearSpec> layers = layout.StageLayers(s, t);
      for (size_t i = 0; i < layers.size(); ++i) {
        const LinearSpec& l = layers[i];
        const double w = static_cast<double>(tables[l.weight].size) + tables[l.bias].size;
        c.pulled += w;
        if (layout.IsSlice(l.weight) || t == 0) c.pushed += tables[l.weight].size;
        if (layout.IsSlice(l.bias) || t == 0) c.pushed += tables[l.bias].size;
        c.flops += 6.0 * b * l.in * l.out;
        if (i + 1 < layers.size()) c.acts += mb_rows * l.out;  // kept hidden outputs
        if (l.split == TpSplit::kRow) c.comm_tp += RingBytes(kFloat * b * l.out, tp);
        if (l.split == TpSplit::kColumn) c.comm_tp += RingBytes(kFloat * b * l.in, tp);
        if (l.split != TpSplit::kNone) any_split = true;
      }
      const int in_w = layers.front().in, out_w = layers.back().out;
      c.acts += mb_rows * (in_w + out_w);  // the slot's input (or head output) and output
      if (s == 0) {
        c.pulled += head_floats;
        if (t == 0) c.pushed += head_floats;
        c.flops += spec.head_cost;
        c.acts += mb_rows * in_w;  // the head's own activations
        c.sparse_floats = sparse_floats;
      }
      // Kept micro-batches, then one set of gradient scratch.
      const int live = in.schedule == worker::PipeSchedule::kGpipe
                           ? microbatches
                           : std::min(microbatches, stages - s);
      double scratch = 0;
      for (const LinearSpec& l : layers) scratch += mb_rows * l.out;
      c.acts = c.acts * live + scratch + mb_rows * (in_w + out_w);
      if (s > 0) c.comm_pipe += 2 * kFloat * b * in_w;  // activations in, gradients out
      if (s + 1 < stages) c.comm_pipe += 2 * kFloat * b * out_w;
      c.comm_ps = kFloat * (c.pulled + c.pushed + (s == 0 ? (t == 0 ? 2 : 1) * sparse_floats : 0));
      max_stage_flops = std::max(max_stage_flops, c.flops);
      const double bytes = kFloat * (4 * c.pulled + 2 * c.sparse_floats + c.acts);
      if (bytes > worst_bytes) {
        worst_bytes = bytes;
        worst = c;
      }
      e.comm_pipeline = std::max(e.comm_pipeline, c.comm_pipe);
      e.comm_tp = std::max(e.comm_tp, c.comm_tp);
      e.comm_ps = std::max(e.comm_ps, c.comm_ps);
    }
  }
  e.weights = 3 * kFloat * worst.pulled;
  e.gradients = kFloat * (worst.pulled + 2 * worst.sparse_floats);
  e.activations = kFloat * worst.acts;
  e.total = e.baseline + e.weights + e.gradients + e.activations;
  // Optimizer state of every dense weight, spread over the servers (the
  // embeddings' state grows with the ids seen, not counted).
  double dense_weights = 0;
  for (const TableSpec& t : tables) {
    if (t.kind == TableKind::kDense && !t.on_workers) dense_weights += t.size;
  }
  auto opt = optim::Optimizer::Create(in.model.dense_optimizer);
  const double planes = opt.ok() ? static_cast<double>((*opt)->StatePlanes()) : 1.0;
  e.optimizer_per_server = kFloat * planes * dense_weights / std::max(1, in.servers);

  // Time of a step: the slowest stage's compute, stretched by the bubble
  // ((M + P - 1) / M), plus the busiest worker's traffic.
  const double bubble = static_cast<double>(microbatches + stages - 1) / microbatches;
  e.step_seconds = bubble * max_stage_flops / std::max(1.0, in.flops_per_worker) +
                   e.comm_total() / std::max(1.0, in.bandwidth_bytes);
  e.samples_per_sec = e.step_seconds > 0 ? replicas * b / e.step_seconds : 0;

  if (tp > 1 && !any_split) {
    e.feasible = false;
    e.why_not = "no pair of tower layers to split within a stage";
  } else if (in.device_memory_bytes > 0 && e.total > in.device_memory_bytes) {
    e.feasible = false;
    e.why_not = "exceeds --device_memory";
  }
  return e;
}

absl::StatusOr<std::vector<LayoutEstimate>> EstimateLayouts(const PlanInputs& in) {
  if (in.workers < 1) return absl::InvalidArgumentError("--workers must be >= 1");
  if (in.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(in.model));
  PS_ASSIGN_OR_RETURN(worker::PipelineModelSpec spec,
                      worker::DescribePipelineModel(in.model, *model, in.batch_size));
  const int layers = static_cast<int>(spec.tower.size());
  int narrowest = 1 << 30;
  for (size_t i = 0; i + 1 < spec.tower.size(); ++i)
    narrowest = std::min(narrowest, spec.tower[i].out);
  std::vector<LayoutEstimate> out;
  for (int p = 1; p <= in.workers; ++p) {
    for (int t = 1; t <= in.workers / p; ++t) {
      if (in.workers % (p * t) != 0 || p > layers || t > narrowest) continue;
      const int r = in.workers / (p * t);
      std::vector<int> ms = {1};
      if (p > 1) ms = {p, 2 * p, 4 * p};
      for (int m : ms) {
        if (m > in.batch_size) continue;
        auto e = EstimateLayout(in, r, p, t, m);
        if (!e.ok()) continue;  // this cut does not exist (e.g. --stage_layers)
        out.push_back(*std::move(e));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const LayoutEstimate& a, const LayoutEstimate& b) {
    if (a.feasible != b.feasible) return a.feasible;
    return a.samples_per_sec > b.samples_per_sec;
  });
  return out;
}

double MeasureFlops() {
  // Long enough for a stable figure, short enough for a CLI answer.
  constexpr absl::Duration kMeasureFor = absl::Milliseconds(200);
  const int n = 256;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  worker::nn::Sgemm(worker::nn::Trans::kNo, worker::nn::Trans::kNo, n, n, n, 1.0f, a.data(), n,
                    b.data(), n, 0.0f, c.data(), n);  // warm-up
  int runs = 0;
  const absl::Time start = absl::Now();
  absl::Duration spent;
  do {
    worker::nn::Sgemm(worker::nn::Trans::kNo, worker::nn::Trans::kNo, n, n, n, 1.0f, a.data(), n,
                      b.data(), n, 0.0f, c.data(), n);
    ++runs;
    spent = absl::Now() - start;
  } while (spent < kMeasureFor);
  return 2.0 * n * n * n * runs / absl::ToDoubleSeconds(spent);
}

}  // namespace pstrain::launcher
