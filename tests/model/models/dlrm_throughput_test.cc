// Throughput report (no timed assertions): DLRM TrainStep samples/s on the
// CPU at the default shapes, and where a step's time goes, layer by layer.
// Run: model_models_tests --gtest_filter='DlrmThroughput.*'
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "model/models/model_base.h"
#include "model/nn/blas.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/interaction.h"
#include "model/nn/linear.h"
#include "model/nn/loss.h"
#include "model/nn/tensor.h"
#include "tests/model/models/model_test_util.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU time of this thread: unlike wall time, not inflated while other
// processes share the core.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Criteo-like: one id per field from a large id space (few repeats).
Batch CriteoLikeBatch(int size, std::mt19937& rng) {
  return testing::RandomBatch(size, 13, 26, 1, 1 << 20, rng);
}

double MeasureTrainStep(int batch_size, double budget_s) {
  ModelOptions options;  // dlrm defaults: 13 dense, 26 sparse, dim 16, 64-16 / 64-32-1
  auto model_or = CreateModel(options);
  EXPECT_TRUE(model_or.ok()) << model_or.status();
  if (!model_or.ok()) return 0;
  Model& model = **model_or;
  std::mt19937 rng(1);
  Batch batch = CriteoLikeBatch(batch_size, rng);
  BatchPlan plan;
  model.Plan(batch, &plan);
  testing::LocalParams store(model);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(model.TrainStep(batch, plan, params, &grads).ok());
  // Best of several windows: other processes on the machine only slow a
  // window down.
  int steps = 0;
  double best_step_s = 1e9, best_cpu_step_s = 1e9;
  const auto start = Clock::now();
  while (Seconds(start) < budget_s) {
    const auto window = Clock::now();
    const double cpu = ThreadCpuSeconds();
    const int window_steps = std::max(1, 50 * 1024 / batch_size);
    for (int i = 0; i < window_steps; ++i) {
      EXPECT_TRUE(model.TrainStep(batch, plan, params, &grads).ok());
    }
    steps += window_steps;
    best_step_s = std::min(best_step_s, Seconds(window) / window_steps);
    best_cpu_step_s = std::min(best_cpu_step_s, (ThreadCpuSeconds() - cpu) / window_steps);
  }
  // Plan() speed, for reference.
  const auto plan_start = Clock::now();
  for (int i = 0; i < 20; ++i) model.Plan(batch, &plan);
  const double plan_s = Seconds(plan_start) / 20;
  const double sps = batch_size / best_step_s;
  std::printf(
      "dlrm TrainStep batch %4d: %7.0f samples/s wall (%.3f ms/step), %7.0f samples/s by thread "
      "CPU time; %d steps; Plan %.3f ms\n",
      batch_size, sps, 1e3 * best_step_s, batch_size / best_cpu_step_s, steps, 1e3 * plan_s);
  return sps;
}

TEST(DlrmThroughput, PrintsTrainStepSamplesPerSecond) {
  EXPECT_GT(MeasureTrainStep(1024, 1.0), 0);
  EXPECT_GT(MeasureTrainStep(256, 1.0), 0);
}

// The same computation as DlrmModel's step (chunks of kCpuChunkRows rows,
// dense gradients accumulated), layer by layer, with timers.
TEST(DlrmThroughput, PrintsPerLayerBreakdown) {
  using namespace nn;  // NOLINT
  UseSingleThreadedBlas();
  const int batch = 1024, rows = kCpuChunkRows, dense = 13, fields = 26, dim = 16, n = fields + 1;
  const int t_width = n * dim, z_width = InteractionOutputWidth(n, dim);
  std::mt19937 rng(2);
  Batch b = CriteoLikeBatch(batch, rng);
  auto rnd = [&](size_t count) { return testing::RandomVector(count, rng, -0.1f, 0.1f); };
  auto wb0 = rnd(64 * 13), bb0 = rnd(64), wb1 = rnd(16 * 64), bb1 = rnd(16);
  auto wt0 = rnd(64 * z_width), bt0 = rnd(64), wt1 = rnd(32 * 64), bt1 = rnd(32);
  auto wt2 = rnd(32), bt2 = rnd(1), emb = rnd(static_cast<size_t>(batch) * dim);
  std::vector<float> g(1 << 16), d_emb(emb.size()), dlogit(batch);
  std::vector<uint32_t> index(batch);
  for (int i = 0; i < batch; ++i) index[i] = (i * 7919) % batch;
  Matrix hb0(rows, 64), t(rows, t_width), z(rows, z_width), ht0(rows, 64), ht1(rows, 32),
      logit(batch, 1), dht1(rows, 32), dht0(rows, 64), dz(rows, z_width), dt(rows, t_width),
      dhb0(rows, 64);

  struct Phase {
    const char* name;
    double seconds = 0;
  };
  std::vector<Phase> phases;
  auto timed = [&](const char* name, auto&& fn) {
    const double start = ThreadCpuSeconds();
    fn();
    const double s = ThreadCpuSeconds() - start;
    for (Phase& p : phases) {
      if (p.name == name) {
        p.seconds += s;
        return;
      }
    }
    phases.push_back(Phase{name, s});
  };
  const int iters = 50;
  for (int it = 0; it < iters + 2; ++it) {
    if (it == 2) phases.clear();  // warm-up
    timed("zero sparse grads", [&] {
      for (int f = 0; f < fields; ++f) std::fill(d_emb.begin(), d_emb.end(), 0.0f);
    });
    for (int r0 = 0; r0 < batch; r0 += rows) {
      const bool acc = r0 > 0;
      ConstMatrixView x(b.dense.data() + r0 * dense, rows, dense);
      Bags bags{index.data(), b.offsets[0].data() + r0, rows};
      MatrixView lg = logit.view().Rows(r0, rows), dlg(dlogit.data() + r0, rows, 1);
      timed("bottom fwd", [&] {
        LinearForward(x, wb0.data(), bb0.data(), Activation::kRelu, hb0.view());
        LinearForward(hb0.view(), wb1.data(), bb1.data(), Activation::kRelu,
                      t.view().Columns(0, dim));
      });
      timed("embedding fwd", [&] {
        for (int f = 0; f < fields; ++f) {
          EmbeddingBagForward(emb.data(), bags, Pooling::kSum, false,
                              t.view().Columns((f + 1) * dim, dim));
        }
      });
      timed("interaction fwd", [&] { DotInteractionForward(t.view(), n, dim, z.view()); });
      timed("top fwd", [&] {
        LinearForward(z.view(), wt0.data(), bt0.data(), Activation::kRelu, ht0.view());
        LinearForward(ht0.view(), wt1.data(), bt1.data(), Activation::kRelu, ht1.view());
        LinearForward(ht1.view(), wt2.data(), bt2.data(), Activation::kNone, lg);
      });
      timed("loss", [&] { SigmoidBceLoss(lg.data, b.labels.data() + r0, rows, dlg.data); });
      timed("top bwd", [&] {
        LinearBackward(ht1.view(), wt2.data(), lg, Activation::kNone, dlg, g.data(),
                       g.data() + 40000, dht1.view(), acc);
        LinearBackward(ht0.view(), wt1.data(), ht1.view(), Activation::kRelu, dht1.view(),
                       g.data(), g.data() + 40000, dht0.view(), acc);
        LinearBackward(z.view(), wt0.data(), ht0.view(), Activation::kRelu, dht0.view(),
                       g.data(), g.data() + 40000, dz.view(), acc);
      });
      timed("interaction bwd",
            [&] { DotInteractionBackward(t.view(), dz.view(), n, dim, dt.view()); });
      timed("embedding bwd", [&] {
        for (int f = 0; f < fields; ++f) {
          EmbeddingBagBackward(dt.view().Columns((f + 1) * dim, dim), bags, Pooling::kSum,
                               d_emb.data());
        }
      });
      timed("bottom bwd", [&] {
        MatrixView d_bottom = dt.view().Columns(0, dim);
        LinearBackward(hb0.view(), wb1.data(), t.view().Columns(0, dim), Activation::kRelu,
                       d_bottom, g.data(), g.data() + 40000, dhb0.view(), acc);
        LinearBackward(x, wb0.data(), hb0.view(), Activation::kRelu, dhb0.view(), g.data(),
                       g.data() + 40000, MatrixView(), acc);
      });
    }
  }
  double total = 0;
  for (const Phase& p : phases) total += p.seconds;
  std::printf("dlrm step by thread CPU time, batch %d in chunks of %d (%.3f ms/step, %.0f "
              "samples/s):\n",
              batch, rows, 1e3 * total / iters, iters * batch / total);
  for (const Phase& p : phases) {
    std::printf("  %-18s %7.3f ms  %5.1f%%\n", p.name, 1e3 * p.seconds / iters,
                100 * p.seconds / total);
  }
}

}  // namespace
}  // namespace pstrain::worker
