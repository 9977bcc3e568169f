#include "bench/allreduce_bench.h"

#include <gloo/allreduce.h>
#include <gloo/math.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_util.h"
#include "bench/train_bench.h"
#include "common/collective.h"
#include "common/json_line.h"
#include "common/optim/initializer.h"
#include "common/rendezvous.h"
#include "common/status.h"
#include "data/synthetic.h"
#include "model/models/model.h"
#include "worker/allreduce/dense_replica.h"
#include "worker/allreduce/gloo_collective.h"

namespace pstrain::bench {
namespace {

constexpr int kTables = 8;             // pstrain_bucketed: the bytes cut into this many tables
constexpr uint32_t kDirectTagBase = 1u << 30;  // tags of the direct Gloo calls

double BusFactor(int ranks) { return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0; }

// One rank: its Gloo group, a buffer, and the bucketed replica of the same
// bytes. Used only by the rank's thread.
struct Rank {
  std::unique_ptr<worker::GlooCollective> gloo;
  uint32_t direct_tag = kDirectTagBase;
};

// What rank 0 measured for one (impl, size, round).
struct Timing {
  double seconds_per_op = 0;
  double step_seconds = 0;  // pstrain_bucketed: with the optimizer step
};

// Agrees on an iteration count: rank 0 times two warm-up ops and picks
// enough for `seconds`; the others take its count by broadcast.
absl::StatusOr<int> AgreeIterations(Collective& c, double warm_seconds_per_op, double seconds) {
  float iters = 0;
  if (c.rank() == 0) {
    double n = warm_seconds_per_op > 0 ? seconds / warm_seconds_per_op : 1000;
    iters = static_cast<float>(std::clamp(n, 3.0, 20000.0));
  }
  PS_RETURN_IF_ERROR(c.Broadcast(&iters, 1, 0));
  return static_cast<int>(iters);
}

struct Timed {
  double seconds_per_op = 0;
  int iters = 0;
};

// Runs `op` timed: two warm-up calls, then an agreed count after a
// barrier; `before_timed` runs just before the timed calls.
template <class Op, class Hook>
absl::StatusOr<Timed> TimeOp(Collective& c, double seconds, Op op, Hook before_timed) {
  auto t0 = Clock::now();
  for (int i = 0; i < 2; ++i) PS_RETURN_IF_ERROR(op());
  PS_ASSIGN_OR_RETURN(int iters, AgreeIterations(c, SecondsSince(t0) / 2, seconds));
  PS_RETURN_IF_ERROR(c.Barrier());
  before_timed();
  t0 = Clock::now();
  for (int i = 0; i < iters; ++i) PS_RETURN_IF_ERROR(op());
  return Timed{SecondsSince(t0) / iters, iters};
}

std::vector<TableSpec> ReplicaTables(size_t floats) {
  std::vector<TableSpec> tables;
  size_t left = floats;
  for (int k = 0; k < kTables; ++k) {
    TableSpec t;
    t.id = static_cast<uint32_t>(k);
    t.name = absl::StrCat("bench.dense", k);
    t.kind = TableKind::kDense;
    t.size = k + 1 == kTables ? left : floats / kTables;
    t.size = std::max<uint64_t>(1, t.size);
    left -= std::min<size_t>(left, floats / kTables);
    t.optimizer.kind = OptimizerKind::kSgd;
    t.optimizer.lr = 0.01f;  // the gradients are zeros: weights stay put
    t.on_workers = true;
    tables.push_back(t);
  }
  return tables;
}

// One size on one rank: every impl, `rounds` times, alternating. Rank 0
// fills `out[impl][round]`.
absl::Status RunSize(Rank& r, size_t bytes, const AllreduceBenchOptions& o,
                     std::vector<std::vector<Timing>>* out) {
  Collective& c = *r.gloo;
  const size_t n = std::max<size_t>(1, bytes / sizeof(float));
  std::vector<float> data(n, 0.0f);  // zeros: sums stay finite
  CollectiveQueue queue;
  worker::DenseReplicaOptions ro;
  ro.bucket_bytes = o.bucket_bytes;
  ro.overlap = true;
  const std::vector<TableSpec> tables = ReplicaTables(n);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::DenseReplica> replica,
                      worker::DenseReplica::Create(tables, ro, &c, &queue));
  auto direct = [&]() -> absl::Status {
    try {
      gloo::AllreduceOptions opts(r.gloo->context());
      opts.setOutput(data.data(), n);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(r.direct_tag++);
      // The collective's algorithm (GlooOptions' default), so that the
      // ratio is the wrapper's cost, not the algorithms'.
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("gloo::allreduce: ", e.what()));
    }
    return absl::OkStatus();
  };
  auto collective = [&]() { return c.AllReduce(data.data(), n, ReduceOp::kSum); };
  double comm_sum = 0, step_sum = 0;
  auto bucketed = [&]() -> absl::Status {
    auto t0 = Clock::now();
    replica->BeginStep();
    for (auto it = tables.rbegin(); it != tables.rend(); ++it) replica->OnReady(it->id);
    const double handed = SecondsSince(t0);
    PS_RETURN_IF_ERROR(replica->Finish(1).status());
    comm_sum += handed + replica->last_wait_seconds();
    step_sum += SecondsSince(t0);
    return absl::OkStatus();
  };
  auto nothing = [] {};
  auto reset = [&] { comm_sum = step_sum = 0; };
  for (int round = 0; round < o.rounds; ++round) {
    PS_ASSIGN_OR_RETURN(Timed t_gloo, TimeOp(c, o.seconds, direct, nothing));
    PS_ASSIGN_OR_RETURN(Timed t_pstrain, TimeOp(c, o.seconds, collective, nothing));
    PS_ASSIGN_OR_RETURN(Timed t_bucketed, TimeOp(c, o.seconds, bucketed, reset));
    if (c.rank() == 0) {
      (*out)[0].push_back(Timing{t_gloo.seconds_per_op, 0});
      (*out)[1].push_back(Timing{t_pstrain.seconds_per_op, 0});
      (*out)[2].push_back(Timing{comm_sum / t_bucketed.iters, step_sum / t_bucketed.iters});
    }
  }
  return c.Barrier();
}

const char* const kImpls[] = {"gloo", "pstrain", "pstrain_bucketed"};

void Report(int ranks, size_t bytes, const std::vector<std::vector<Timing>>& timings) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<Timing>& t = timings[i];
    if (t.empty()) continue;
    std::vector<double> secs;
    for (const Timing& x : t) secs.push_back(x.seconds_per_op);
    const double best = *std::min_element(secs.begin(), secs.end());
    const double worst = *std::max_element(secs.begin(), secs.end());
    const double algbw = static_cast<double>(bytes) / best / 1e9;
    JsonLine line;
    line.Add("bench", "allreduce")
        .Add("impl", kImpls[i])
        .Add("workers", ranks)
        .Add("ranks", ranks)
        .Add("bytes", static_cast<uint64_t>(bytes))
        .Add("algbw_gbps", algbw)
        .Add("busbw_gbps", algbw * BusFactor(ranks))
        .Add("us", best * 1e6)
        .Add("median_us", Median(secs) * 1e6)
        .Add("worst_us", worst * 1e6)
        .Add("rounds", static_cast<int64_t>(t.size()));
    if (i == 2) {
      size_t k = static_cast<size_t>(std::min_element(secs.begin(), secs.end()) - secs.begin());
      line.Add("step_us", t[k].step_seconds * 1e6);  // with the optimizer step
    }
    PrintResult(line);
  }
}

// ---- Overlap of the bucketed allreduce with the backward pass ----

struct OverlapRound {
  double step = 0, compute = 0, wait = 0;  // seconds per step, rank 0
};

absl::StatusOr<OverlapRound> RunOverlapSteps(Collective& c, worker::Model& model,
                                             worker::DenseReplica& replica,
                                             std::vector<LocalBatch>& batches, int steps) {
  OverlapRound r;
  PS_RETURN_IF_ERROR(c.Barrier());
  for (int s = 0; s < steps + 1; ++s) {  // the first step is a warm-up
    LocalBatch& b = batches[s % batches.size()];
    auto t0 = Clock::now();
    replica.BeginStep();
    for (uint32_t t : replica.table_ids()) b.grad_refs.tables[t] = replica.grad(t);
    b.grad_refs.on_ready = [&replica](uint32_t t) { replica.OnReady(t); };
    PS_ASSIGN_OR_RETURN(worker::StepOutput out, model.TrainStep(*b.batch, b.plan, b.params, &b.grad_refs));
    const double compute = SecondsSince(t0);
    PS_RETURN_IF_ERROR(replica.Finish(static_cast<uint32_t>(out.num_samples)).status());
    if (s == 0) continue;
    r.step += SecondsSince(t0);
    r.compute += compute;
    r.wait += replica.last_wait_seconds();
  }
  r.step /= steps;
  r.compute /= steps;
  r.wait /= steps;
  return r;
}

// One rank of the overlap measurement; rank 0 fills `out[overlap][round]`.
absl::Status RunOverlapRank(Rank& r, const AllreduceBenchOptions& o,
                            std::vector<std::vector<OverlapRound>>* out, size_t* grad_bytes) {
  Collective& c = *r.gloo;
  worker::ModelOptions mo;
  mo.name = "deep_tower";
  mo.deep_mlp.assign(o.tower_layers, o.tower_width);
  mo.device = "cpu";
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(mo));
  std::vector<TableSpec> tables = model->tables();
  for (TableSpec& t : tables) t.on_workers = t.kind == TableKind::kDense;
  CollectiveQueue queue;
  std::unique_ptr<worker::DenseReplica> replicas[2];
  for (int ov = 0; ov < 2; ++ov) {
    worker::DenseReplicaOptions ro;
    ro.bucket_bytes = o.bucket_bytes;
    ro.overlap = ov == 1;
    PS_ASSIGN_OR_RETURN(replicas[ov], worker::DenseReplica::Create(tables, ro, &c, &queue));
  }
  worker::SyntheticOptions wo;
  wo.num_dense = mo.num_dense;
  wo.num_sparse = mo.num_sparse;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::SyntheticWorld> world, worker::SyntheticWorld::Create(wo));
  worker::Schema schema;
  schema.num_dense = mo.num_dense;
  schema.num_sparse = mo.num_sparse;
  std::vector<LocalBatch> batches[2];
  for (int ov = 0; ov < 2; ++ov) {
    std::vector<const float*> dense(tables.size(), nullptr);
    for (uint32_t t : replicas[ov]->table_ids()) dense[t] = replicas[ov]->params(t);
    batches[ov].resize(2);
    for (size_t k = 0; k < batches[ov].size(); ++k) {
      const int64_t first = (static_cast<int64_t>(c.rank()) * 2 + static_cast<int64_t>(k)) * o.batch_size;
      PS_ASSIGN_OR_RETURN(batches[ov][k].batch, worker::GenerateBatch(*world, first, o.batch_size, schema));
      PS_RETURN_IF_ERROR(BindLocalBatch(*model, dense, &batches[ov][k]));
    }
  }
  size_t floats = 0;
  for (uint32_t t : replicas[0]->table_ids()) floats += tables[t].size;
  *grad_bytes = floats * sizeof(float);
  for (int round = 0; round < o.overlap_rounds; ++round) {
    for (int ov = 0; ov < 2; ++ov) {
      PS_ASSIGN_OR_RETURN(OverlapRound x, RunOverlapSteps(c, *model, *replicas[ov], batches[ov],
                                                          o.overlap_steps));
      if (c.rank() == 0) (*out)[ov].push_back(x);
    }
  }
  return c.Barrier();
}

void ReportOverlap(const AllreduceBenchOptions& o, int ranks, size_t grad_bytes,
                   const std::vector<std::vector<OverlapRound>>& rounds) {
  OverlapRound best[2];
  for (int ov = 0; ov < 2; ++ov) {
    if (rounds[ov].empty()) return;
    best[ov] = *std::min_element(rounds[ov].begin(), rounds[ov].end(),
                                 [](const OverlapRound& a, const OverlapRound& b) { return a.step < b.step; });
    std::vector<double> steps;
    for (const OverlapRound& x : rounds[ov]) steps.push_back(x.step);
    JsonLine line;
    line.Add("bench", "allreduce_overlap")
        .Add("overlap", ov == 1)
        .Add("workers", ranks)
        .Add("model", "deep_tower")
        .Add("tower_layers", o.tower_layers)
        .Add("tower_width", o.tower_width)
        .Add("batch_size", o.batch_size)
        .Add("grad_bytes", static_cast<uint64_t>(grad_bytes))
        .Add("bucket_mb", static_cast<double>(o.bucket_bytes) / (1 << 20))
        .Add("step_ms", best[ov].step * 1e3)
        .Add("median_step_ms", Median(steps) * 1e3)
        .Add("compute_ms", best[ov].compute * 1e3)
        .Add("comm_wait_ms", best[ov].wait * 1e3)
        .Add("rounds", static_cast<int64_t>(rounds[ov].size()));
    PrintResult(line);
  }
  // Without overlap every bucket starts after compute: its wait is the
  // whole allreduce. With overlap, what is left of that wait is exposed.
  const double comm = best[0].wait;
  const double hidden = comm > 0 ? std::clamp(1.0 - best[1].wait / comm, 0.0, 1.0) : 0.0;
  JsonLine line;
  line.Add("bench", "allreduce_overlap_summary")
      .Add("workers", ranks)
      .Add("compute_plus_comm_ms", (best[0].compute + best[0].wait) * 1e3)
      .Add("step_no_overlap_ms", best[0].step * 1e3)
      .Add("step_overlap_ms", best[1].step * 1e3)
      .Add("comm_ms", comm * 1e3)
      .Add("exposed_comm_ms", best[1].wait * 1e3)
      .Add("hidden_fraction", hidden)
      .Add("overlap_step_below_sum", best[1].step < best[0].compute + best[0].wait);
  PrintResult(line);
}

// Runs `body(rank)` on `ranks` threads, each with its own Gloo group.
template <class Body>
absl::Status OnRanks(int ranks, const std::string& prefix, Body body) {
  InMemoryRendezvousStore store;
  std::vector<absl::Status> status(ranks);
  std::vector<std::thread> threads;
  for (int k = 0; k < ranks; ++k) {
    threads.emplace_back([&, k] {
      Rank r;
      worker::GlooOptions go;
      go.rank = k;
      go.size = ranks;
      go.prefix = prefix;
      go.timeout = absl::Seconds(120);
      auto gloo = worker::GlooCollective::Create(go, &store);
      if (!gloo.ok()) {
        status[k] = gloo.status();
        return;
      }
      r.gloo = *std::move(gloo);
      status[k] = body(r);
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < ranks; ++k) {
    if (!status[k].ok()) return Annotate(status[k], absl::StrCat("rank ", k));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunAllreduceBench(const AllreduceBenchOptions& o) {
  if (o.ranks < 2) return absl::InvalidArgumentError("allreduce: --workers must be >= 2");
  if (o.rounds < 1) return absl::InvalidArgumentError("allreduce: --rounds must be >= 1");
  for (size_t bytes : o.bytes) {
    std::vector<std::vector<Timing>> timings(3);
    PS_RETURN_IF_ERROR(OnRanks(o.ranks, absl::StrCat("bench/", bytes), [&](Rank& r) {
      return RunSize(r, bytes, o, &timings);
    }));
    Report(o.ranks, bytes, timings);
  }
  if (o.overlap_steps > 0) {
    std::vector<std::vector<OverlapRound>> rounds(2);
    size_t grad_bytes = 0;
    PS_RETURN_IF_ERROR(OnRanks(o.ranks, "bench/overlap", [&](Rank& r) {
      size_t g = 0;
      absl::Status st = RunOverlapRank(r, o, &rounds, &g);
      if (r.gloo->rank() == 0) grad_bytes = g;
      return st;
    }));
    ReportOverlap(o, o.ranks, grad_bytes, rounds);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::bench
