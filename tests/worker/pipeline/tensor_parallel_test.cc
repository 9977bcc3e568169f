// 3D parallelism (replicas x stages x tensor-parallel ranks) computes the
// unsplit model: for every layout with R, P, T in {1, 2}, the gradients
// that the workers push, summed and scaled as a BSP server does, and the
// optimizer update that follows, equal those of the unsplit model on the
// same (global) batch. Every worker is a thread with its own RPC node on an
// in-process network (pipeline links) and a Gloo group over loopback TCP
// (tensor-parallel collectives); no servers: the test plays their part.
#include "worker/pipeline/tensor_parallel.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/optim/optimizer.h"
#include "common/rendezvous.h"
#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"
#include "tests/worker/pipeline/stage_harness.h"
#include "worker/allreduce/gloo_collective.h"

namespace pstrain::worker {
namespace {

using testing::LocalParams;
using testing::LocalStep;
using testing::RandomBatch;
using testing::RelativeError;
using testing::StageNode;

ModelOptions TowerOptions() {
  ModelOptions o = testing::TinyOptions("deep_tower");
  o.deep_mlp = {16, 16, 16, 16};  // 5 tower layers with the logit
  return o;
}

// Rows [begin, end) of `b`.
Batch SliceBatch(const Batch& b, int begin, int end) {
  Batch s;
  s.size = end - begin;
  s.num_dense = b.num_dense;
  s.num_sparse = b.num_sparse;
  s.labels.assign(b.labels.begin() + begin, b.labels.begin() + end);
  s.dense.assign(b.dense.begin() + static_cast<size_t>(begin) * b.num_dense,
                 b.dense.begin() + static_cast<size_t>(end) * b.num_dense);
  s.ids.resize(b.num_sparse);
  s.offsets.resize(b.num_sparse);
  for (int f = 0; f < b.num_sparse; ++f) {
    const uint32_t lo = b.offsets[f][begin], hi = b.offsets[f][end];
    s.ids[f].assign(b.ids[f].begin() + lo, b.ids[f].begin() + hi);
    for (int r = begin; r <= end; ++r) s.offsets[f].push_back(b.offsets[f][r] - lo);
  }
  return s;
}

TEST(TensorParallelLayout, PairsColumnAndRowLayersWithinStagesAndSlicesTheirTables) {
  const ModelOptions options = TowerOptions();
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto spec = DescribePipelineModel(options, **model, 8);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto partition = PartitionTower(*spec, 2, "0-2,3-4");
  ASSERT_TRUE(partition.ok());
  auto layout = TensorParallelLayout::Create((*model)->tables(), *spec, *partition, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // Stage 0: layers 0+1 paired, 2 alone; stage 1: 3 alone (4 is the logit).
  EXPECT_EQ(layout->split(0), TpSplit::kColumn);
  EXPECT_EQ(layout->split(1), TpSplit::kRow);
  EXPECT_EQ(layout->split(2), TpSplit::kNone);
  EXPECT_EQ(layout->split(3), TpSplit::kNone);
  EXPECT_EQ(layout->split(4), TpSplit::kNone);
  const auto& tables = layout->tables();
  const size_t n = (*model)->tables().size();
  ASSERT_EQ(tables.size(), n + 6);  // 2 x (weight, bias) of layer 0, 2 x weight of layer 1
  EXPECT_EQ(tables[n].name, "tower.0.weight.tp0of2");
  EXPECT_EQ(tables[n].size, 8u * 15u);
  EXPECT_FALSE(tables[n].on_workers);
  auto id = FindTable(**model, "tower.0.weight");
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(tables[*id].on_workers);  // the servers hold only its slices
  auto bias1 = FindTable(**model, "tower.1.bias");
  ASSERT_TRUE(bias1.ok());
  EXPECT_FALSE(tables[*bias1].on_workers);
  std::vector<LinearSpec> s0 = layout->StageLayers(0, 1);
  ASSERT_EQ(s0.size(), 3u);
  EXPECT_EQ(s0[0].out, 8);
  EXPECT_EQ(s0[1].in, 8);
  EXPECT_EQ(s0[1].bias, *bias1);
  // Rank 1 pushes its slices only; rank 0 also the replicated tables.
  std::vector<uint32_t> used;
  for (const LinearSpec& l : s0) {
    used.push_back(l.weight);
    used.push_back(l.bias);
  }
  EXPECT_EQ(layout->PushedTables(used, 1).size(), 3u);
  EXPECT_EQ(layout->PushedTables(used, 0).size(), 6u);
  // Extract and Insert are inverse.
  std::vector<float> full(16 * 16), back(16 * 16, 0.0f);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  for (const TpSlice& s : layout->slices()) {
    if (s.full_cols != 16 || s.full_rows != 16) continue;
    std::vector<float> part(s.size());
    layout->Extract(s, full.data(), part.data());
    layout->Insert(s, part.data(), back.data());
  }
  EXPECT_EQ(back, full);  // layer 1's two column slices cover it
}

using Param = std::tuple<int, int, int, PipeSchedule>;  // R, P, T, schedule

class TensorParallelEquivalenceTest : public ::testing::TestWithParam<Param> {};

// One worker's outcome.
struct WorkerOut {
  absl::Status status;
  StageStepStats stats;
  std::vector<std::vector<float>> grads;  // by job table id
  std::vector<uint32_t> pushed;
  bool pushes_sparse = false;
};

TEST_P(TensorParallelEquivalenceTest, PushedGradientsAndUpdateEqualTheUnsplitModel) {
  const auto& [replicas, stages, tp, schedule] = GetParam();
  const ModelOptions options = TowerOptions();
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  const int microbatches = 3;
  const int rows = 22;  // the global batch; replicas take halves, micro-batches of 3-4 rows
  std::mt19937 rng(17);
  Batch global = RandomBatch(rows, 3, 3, 3, 5, rng);

  // The unsplit model on the whole batch.
  LocalStep ref_step(model, global, 0.5f);
  auto& [ref_plan, ref_store, ref_params, ref_grads] = ref_step;
  auto ref = model.TrainStep(global, ref_plan, ref_params, &ref_grads);
  ASSERT_TRUE(ref.ok()) << ref.status();

  // The layout.
  auto spec = DescribePipelineModel(options, model, rows);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto partition = PartitionTower(*spec, stages, stages == 2 ? "0-1,2-4" : "");
  ASSERT_TRUE(partition.ok()) << partition.status();
  auto layout_or = TensorParallelLayout::Create(model.tables(), *spec, *partition, tp);
  ASSERT_TRUE(layout_or.ok()) << layout_or.status();
  const TensorParallelLayout& layout = *layout_or;
  const auto& tables = layout.tables();

  // Each replica's batch, plan and parameters (the same values: LocalParams
  // is deterministic), with the slice tables cut from the full ones.
  std::vector<std::shared_ptr<const Batch>> batches;
  std::vector<BatchPlan> plans(replicas);
  std::vector<std::unique_ptr<LocalParams>> stores;
  std::vector<ParamRefs> params(replicas);
  std::vector<std::vector<std::vector<float>>> slice_values(replicas);
  for (int r = 0; r < replicas; ++r) {
    batches.push_back(std::make_shared<const Batch>(
        SliceBatch(global, r * rows / replicas, (r + 1) * rows / replicas)));
    model.Plan(*batches[r], &plans[r]);
    stores.push_back(std::make_unique<LocalParams>(model, 0.5f));
    GradRefs unused;
    stores[r]->Bind(plans[r], &params[r], &unused);
    params[r].tables.resize(tables.size(), nullptr);
    slice_values[r].resize(tables.size());
    for (const TpSlice& s : layout.slices()) {
      slice_values[r][s.table].resize(s.size());
      layout.Extract(s, stores[r]->dense(s.full).data(), slice_values[r][s.table].data());
      params[r].tables[s.table] = slice_values[r][s.table].data();
    }
  }

  // The workers: rank = (replica * P + stage) * T + tp.
  const int workers = replicas * stages * tp;
  InProcNetwork net;
  std::vector<std::unique_ptr<StageNode>> nodes;
  std::vector<std::unique_ptr<PipeComm>> comms(workers);
  for (int w = 0; w < workers; ++w) {
    nodes.push_back(std::make_unique<StageNode>(&net, testing::StageEndpoint(w)));
  }
  for (int w = 0; w < workers && stages > 1; ++w) {
    const WorkerPlace at = PlaceOf3d(w, stages, tp);
    PipeCommOptions o = testing::LinkOptions(*spec, *partition, at.stage, microbatches, rows);
    o.replica = at.replica;
    o.rank = w;
    if (at.stage > 0) {
      o.prev_rank = w - tp;
      o.prev_endpoint = testing::StageEndpoint(w - tp);
    }
    if (at.stage + 1 < stages) {
      o.next_rank = w + tp;
      o.next_endpoint = testing::StageEndpoint(w + tp);
    }
    comms[w] = std::make_unique<PipeComm>(nodes[w]->node(), o);
    nodes[w]->SetComm(comms[w].get());
  }
  // The tensor-parallel groups (their members meet concurrently), then the
  // runners.
  InMemoryRendezvousStore store;
  std::vector<WorkerOut> out(workers);
  std::vector<std::unique_ptr<GlooCollective>> groups(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers && tp > 1; ++w) {
    threads.emplace_back([&, w] {
      const WorkerPlace at = PlaceOf3d(w, stages, tp);
      GlooOptions go;
      go.rank = at.tp;
      go.size = tp;
      go.prefix = "tp/" + std::to_string(at.replica) + "/" + std::to_string(at.stage);
      go.timeout = absl::Seconds(30);
      auto g = GlooCollective::Create(go, &store);
      if (g.ok()) {
        groups[w] = *std::move(g);
      } else {
        out[w].status = g.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  for (int w = 0; w < workers; ++w) ASSERT_TRUE(out[w].status.ok()) << out[w].status;
  std::vector<std::unique_ptr<StageRunner>> runners;
  for (int w = 0; w < workers; ++w) {
    const WorkerPlace at = PlaceOf3d(w, stages, tp);
    StageRunnerOptions ro;
    ro.stage = at.stage;
    ro.stages = stages;
    ro.microbatches = microbatches;
    ro.schedule = schedule;
    ro.tp_layout = &layout;
    ro.tp_rank = at.tp;
    ro.tp_group = groups[w].get();
    auto runner = StageRunner::Create(options, model, *spec, *partition, ro, comms[w].get());
    ASSERT_TRUE(runner.ok()) << runner.status();
    runners.push_back(*std::move(runner));
  }
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const WorkerPlace at = PlaceOf3d(w, stages, tp);
      WorkerOut& o = out[w];
      StageRunner* runner = runners[w].get();
      o.pushed = runner->pushed_tables();
      o.pushes_sparse = runner->pushes_sparse();
      const int r = at.replica;
      GradRefs grads;
      for (const TableSpec& t : tables) {
        size_t n = t.kind == TableKind::kDense ? t.size : 0;
        if (t.kind == TableKind::kSparse) {
          for (size_t k = 0; k < model.sparse_tables().size(); ++k) {
            if (model.sparse_tables()[k] == t.id) n = plans[r].lookups[k].unique_ids.size() * t.dim;
          }
        }
        o.grads.emplace_back(n, NAN);
      }
      for (auto& g : o.grads) grads.tables.push_back(g.data());
      for (int step = 0; step < 2 && o.status.ok(); ++step) {  // step 1 reuses every buffer
        StageStepInputs in;
        in.step = step;
        if (at.stage == 0) {
          in.batch = batches[r];
          in.plan = &plans[r];
        }
        in.params = &params[r];
        in.grads = &grads;
        auto st = runner->TrainStep(in);
        if (st.ok()) {
          o.stats = *std::move(st);
        } else {
          o.status = st.status();
          if (comms[w] != nullptr) comms[w]->Abort(o.status);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& n : nodes) n->SetComm(nullptr);
  for (auto& n : nodes) n->Stop();
  for (int w = 0; w < workers; ++w)
    ASSERT_TRUE(out[w].status.ok()) << "worker " << w << ": " << out[w].status;

  // What a BSP server does with the pushes: sums every pushed table (each
  // worker scales by P x T, see PipelineTrainer) and divides by the samples
  // of every push (each of the R x P x T workers pushes its replica's rows).
  const double scale = stages * tp;
  double samples = 0;
  std::vector<std::vector<double>> sum(tables.size());
  std::vector<int> pushes(tables.size(), 0);
  std::vector<std::map<uint64_t, std::vector<double>>> sparse_sum(tables.size());
  for (int w = 0; w < workers; ++w) {
    const WorkerPlace at = PlaceOf3d(w, stages, tp);
    samples += batches[at.replica]->size;
    for (uint32_t t : out[w].pushed) {
      ASSERT_FALSE(tables[t].on_workers) << tables[t].name << " pushed by worker " << w;
      sum[t].resize(tables[t].size, 0.0);
      ++pushes[t];
      for (size_t i = 0; i < tables[t].size; ++i) {
        ASSERT_TRUE(std::isfinite(out[w].grads[t][i])) << tables[t].name << " on worker " << w;
        sum[t][i] += scale * out[w].grads[t][i];
      }
    }
    if (!out[w].pushes_sparse) continue;
    const auto& sparse = model.sparse_tables();
    for (size_t k = 0; k < sparse.size(); ++k) {
      const uint32_t t = sparse[k];
      const auto& ids = plans[at.replica].lookups[k].unique_ids;
      ++pushes[t];
      for (size_t i = 0; i < ids.size(); ++i) {
        auto& row = sparse_sum[t][ids[i]];
        row.resize(tables[t].dim, 0.0);
        for (uint32_t c = 0; c < tables[t].dim; ++c) {
          row[c] += scale * out[w].grads[t][i * tables[t].dim + c];
        }
      }
    }
  }
  // Every table the servers hold is pushed once per replica.
  for (const TableSpec& t : tables) {
    EXPECT_EQ(pushes[t.id], t.on_workers ? 0 : replicas) << t.name;
  }
  // The mean gradient of every model table, reassembled from the slices.
  std::vector<std::vector<float>> mean(model.tables().size());
  for (const TableSpec& t : model.tables()) {
    if (t.kind == TableKind::kDense) mean[t.id].assign(t.size, NAN);
  }
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense || t.on_workers) continue;
    std::vector<float> m(t.size);
    for (size_t i = 0; i < t.size; ++i) m[i] = static_cast<float>(sum[t.id][i] / samples);
    if (layout.IsSlice(t.id)) {
      const TpSlice& s = layout.slices()[t.id - model.tables().size()];
      layout.Insert(s, m.data(), mean[s.full].data());
    } else {
      mean[t.id] = m;
    }
  }
  const auto& sparse = model.sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) {
    const uint32_t t = sparse[k];
    for (uint64_t id : ref_plan.lookups[k].unique_ids) {
      ASSERT_EQ(sparse_sum[t].count(id), 1u) << tables[t].name << " id " << id;
      for (double v : sparse_sum[t][id]) mean[t].push_back(static_cast<float>(v / samples));
    }
    EXPECT_EQ(sparse_sum[t].size(), ref_plan.lookups[k].unique_ids.size());
  }
  for (const TableSpec& t : model.tables()) {
    std::vector<float> want = ref_store.grad(t.id);
    for (float& v : want) v /= static_cast<float>(rows);
    EXPECT_LT(RelativeError(mean[t.id], want), 1e-5) << t.name;
  }
  // The loss of each replica's last stage sums to the whole batch's.
  double loss = 0;
  for (int w = 0; w < workers; ++w) {
    const WorkerPlace at = PlaceOf3d(w, stages, tp);
    if (at.stage == stages - 1 && at.tp == 0) loss += out[w].stats.loss_sum;
  }
  EXPECT_NEAR(loss, ref->loss_sum, 1e-5 * std::abs(ref->loss_sum));

  // One optimizer step, as the servers apply it (on the slices) and as it
  // applies to the unsplit model: the same update of every dense weight.
  // Plain SGD, and Adagrad with a non-zero initial accumulator (from zero,
  // Adagrad's first step is lr * sign(g): elements with |g| near 0 would
  // turn float rounding into any relative error).
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 0.1f;
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.initial_accumulator = 0.1f;
  for (const OptimizerConfig& config : {sgd, adagrad}) {
    for (const TableSpec& t : model.tables()) {
      if (t.kind != TableKind::kDense) continue;
      auto opt = optim::Optimizer::Create(config);
      ASSERT_TRUE(opt.ok()) << opt.status();
      auto update = [&](const float* w0, const float* grad_sum, float grad_scale, size_t n) {
        std::vector<float> w(w0, w0 + n), state((*opt)->StateFloats(n) + 1, 0.0f);
        (*opt)->InitState(state.data(), n, n);
        optim::UpdateArgs a;
        a.weights_in = w.data();
        a.weights_out = w.data();
        a.state = state.data();
        a.state_stride = n;
        a.grads = grad_sum;
        a.n = n;
        a.scale = grad_scale;
        (*opt)->Apply(a);
        for (size_t i = 0; i < n; ++i) w[i] -= w0[i];
        return w;  // the update
      };
      const std::vector<float>& w0 = stores[0]->dense(t.id);
      std::vector<float> want = update(w0.data(), ref_store.grad(t.id).data(), 1.0f / rows, t.size);
      std::vector<float> got(t.size, NAN);
      if (!tables[t.id].on_workers) {
        std::vector<float> g(sum[t.id].begin(), sum[t.id].end());
        got = update(w0.data(), g.data(), static_cast<float>(1.0 / samples), t.size);
      } else {
        for (const TpSlice& s : layout.slices()) {
          if (s.full != t.id) continue;
          std::vector<float> g(sum[s.table].begin(), sum[s.table].end());
          std::vector<float> d = update(slice_values[0][s.table].data(), g.data(),
                                        static_cast<float>(1.0 / samples), s.size());
          layout.Insert(s, d.data(), got.data());
        }
      }
      EXPECT_LT(RelativeError(got, want), 1e-5)
          << optim::OptimizerKindName(config.kind) << " update of " << t.name;
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [r, p, t, schedule] = info.param;
  return "R" + std::to_string(r) + "_P" + std::to_string(p) + "_T" + std::to_string(t) + "_" +
         ScheduleName(schedule);
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, TensorParallelEquivalenceTest,
    ::testing::Combine(::testing::Values(1, 2), ::testing::Values(1, 2), ::testing::Values(1, 2),
                       ::testing::Values(PipeSchedule::k1F1B, PipeSchedule::kGpipe)),
    ParamName);

}  // namespace
}  // namespace pstrain::worker
