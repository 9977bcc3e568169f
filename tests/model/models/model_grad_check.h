// The whole-model gradient check shared by the model tests: the gradients
// TrainStep writes for every table (dense and sparse rows) match central
// differences of its loss on a small random batch.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::testing {

// Gives `batch` `n` extra labels (a multi-task model's): the even ones 0/1
// and missing (NaN) on every third row, the odd ones values in [-1, 2].
inline void AddExtraLabels(Batch* batch, int n, std::mt19937& rng) {
  batch->num_extra_labels = n;
  batch->extra_labels.resize(static_cast<size_t>(batch->size) * n);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int r = 0; r < batch->size; ++r) {
    for (int k = 0; k < n; ++k) {
      float& y = batch->extra_labels[static_cast<size_t>(r) * n + k];
      y = k % 2 == 1 ? 3.0f * u(rng) - 1.0f : (r % 3 == 2 ? NAN : (u(rng) < 0.4f ? 1.0f : 0.0f));
    }
  }
}

// `eps`: the central differences' step; `kinks`: the fraction of a table's
// elements that may be skipped for a ReLU kink within it (deep graphs of
// ReLUs want a small step and a table as small as a bias may hit one).
// `extra_labels`: the batch's (AddExtraLabels), for a model of several heads.
inline void ExpectStepGradientsMatchFiniteDifferences(const ModelOptions& options,
                                                      double eps = 1e-2, double kinks = 0.05,
                                                      int extra_labels = 0) {
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(3);
  // Multi-hot bags over few ids: rows repeat within and across samples.
  Batch batch = RandomBatch(6, 3, 3, 3, 4, rng);
  if (extra_labels > 0) AddExtraLabels(&batch, extra_labels, rng);
  LocalStep step(model, batch, 0.5f);
  auto& [plan, store, params, grads] = step;
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->num_samples, 6);

  std::vector<std::vector<float>> analytic(model.tables().size()), scratch(model.tables().size());
  GradRefs scratch_refs;
  for (const TableSpec& t : model.tables()) {
    analytic[t.id] = store.grad(t.id);
    for (float g : analytic[t.id]) ASSERT_TRUE(std::isfinite(g)) << t.name << " not written";
    scratch[t.id].resize(analytic[t.id].size());
    scratch_refs.tables.push_back(scratch[t.id].data());
  }
  auto loss = [&] {
    auto o = model.TrainStep(batch, plan, params, &scratch_refs);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? o->loss_sum : 0.0;
  };
  GradCheckOptions options;
  options.eps = eps;
  options.atol = 3e-3;
  options.rtol = 1e-2;
  options.max_skipped_fraction = kinks;  // ReLU kinks within eps
  for (const TableSpec& t : model.tables()) {
    float* p = t.kind == TableKind::kDense ? store.dense(t.id).data()
                                           : store.bound_rows(t.id).data();
    ExpectGradientMatches(loss, p, analytic[t.id], analytic[t.id].size(), t.name, options);
  }
}

// Predict's probabilities on a random batch of `rows` rows give the loss
// TrainStep computes on it (more than kCpuChunkRows rows: over chunks).
inline void ExpectPredictAgreesWithTrainStepLoss(const ModelOptions& options, int rows = 21) {
  auto model_or = CreateModel(options);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(4);
  Batch batch = RandomBatch(rows, 3, 3, 2, 50, rng);
  LocalStep step(model, batch, 0.5f);
  auto& [plan, store, params, grads] = step;
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> probs(batch.size);
  ASSERT_TRUE(model.Predict(batch, plan, params, probs).ok());
  double loss = 0;
  for (int r = 0; r < batch.size; ++r) {
    ASSERT_GT(probs[r], 0.0f);
    ASSERT_LT(probs[r], 1.0f);
    loss -= batch.labels[r] == 1.0f ? std::log(probs[r]) : std::log(1.0 - probs[r]);
  }
  EXPECT_NEAR(loss, out->loss_sum, 1e-4 * out->loss_sum);
}

}  // namespace pstrain::worker::testing
