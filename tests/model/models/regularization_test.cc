// The towers' dropout and per-table weight decay: an MLP with dropout has the
// gradients of central differences under its fixed mask; a model with
// dropout predicts as without it and trains on a different (dropped) step;
// every worker draws its own masks; --table_weight_decay reaches the named
// tables only and a name that matches no table is refused.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/mlp.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker {
namespace {

using testing::ExpectGradientMatches;
using testing::LocalStep;
using testing::RandomBatch;
using testing::RandomVector;
using testing::TinyOptions;

TEST(TowerDropout, MlpGradientsMatchFiniteDifferencesUnderTheStepsMask) {
  const int rows = 9, in = 4;
  auto device = nn::CreateDevice("cpu");  // outlives the MLP's buffers
  ASSERT_TRUE(device.ok()) << device.status();
  TableRegistry registry(OptimizerConfig{}, OptimizerConfig{});
  Mlp mlp(&registry, "top", in, {6, 5, 1}, /*relu_last=*/false, 3, /*dropout_hidden=*/true);
  ASSERT_TRUE(mlp.Reserve(device->get(), rows).ok());
  std::mt19937 rng(5);
  std::vector<std::vector<float>> values, grads;
  std::vector<const float*> params;
  std::vector<float*> grad_ptrs;
  for (const TableSpec& t : registry.tables()) {
    values.push_back(RandomVector(t.size, rng));
    grads.emplace_back(t.size, 0.0f);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    params.push_back(values[i].data());
    grad_ptrs.push_back(grads[i].data());
  }
  auto x = RandomVector(rows * in, rng);
  auto w = RandomVector(rows, rng);  // loss = sum_r w_r out_r
  const nn::DropoutRun run{0.4f, 77, 12};
  std::vector<float> out(rows), d_out(rows), dx(rows * in);
  auto loss = [&] {
    EXPECT_TRUE(mlp.Forward(**device, nn::ConstMatrixView(x.data(), rows, in), params,
                            nn::MatrixView(out.data(), rows, 1), run)
                    .ok());
    double s = 0;
    for (int r = 0; r < rows; ++r) s += static_cast<double>(w[r]) * out[r];
    return s;
  };
  const double with_dropout = loss();
  d_out = w;
  ASSERT_TRUE(mlp.Backward(**device, nn::ConstMatrixView(x.data(), rows, in), params,
                           nn::ConstMatrixView(out.data(), rows, 1),
                           nn::MatrixView(d_out.data(), rows, 1), grad_ptrs,
                           nn::MatrixView(dx.data(), rows, in), /*accumulate=*/false)
                  .ok());
  testing::GradCheckOptions o;
  o.max_skipped_fraction = 0.05;  // ReLU kinks within eps
  for (const TableSpec& t : registry.tables()) {
    ExpectGradientMatches(loss, values[t.id].data(), grads[t.id], t.size, t.name, o);
  }
  ExpectGradientMatches(loss, x.data(), dx, x.size(), "x", o);
  // The mask did something: without dropout the output differs.
  ASSERT_TRUE(mlp.Forward(**device, nn::ConstMatrixView(x.data(), rows, in), params,
                          nn::MatrixView(out.data(), rows, 1))
                  .ok());
  double plain = 0;
  for (int r = 0; r < rows; ++r) plain += static_cast<double>(w[r]) * out[r];
  EXPECT_GT(std::abs(plain - with_dropout), 1e-4);
}

class ModelDropoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDropoutTest, PredictIgnoresDropoutAndTrainingStepsAreDropped) {
  ModelOptions plain_options = TinyOptions(GetParam());
  ModelOptions dropped_options = plain_options;
  dropped_options.dropout = 0.5f;
  auto plain = CreateModel(plain_options);
  auto dropped = CreateModel(dropped_options);
  ASSERT_TRUE(plain.ok() && dropped.ok()) << plain.status() << dropped.status();
  std::mt19937 rng(8);
  Batch batch = RandomBatch(40, 3, 3, 2, 30, rng);
  LocalStep a(**plain, batch, 0.5f), b(**dropped, batch, 0.5f);
  std::vector<float> pa(batch.size), pb(batch.size);
  ASSERT_TRUE((*plain)->Predict(batch, a.plan, a.params, pa).ok());
  ASSERT_TRUE((*dropped)->Predict(batch, b.plan, b.params, pb).ok());
  EXPECT_EQ(pa, pb);  // same initial parameters, no dropout when predicting
  auto la = (*plain)->TrainStep(batch, a.plan, a.params, &a.grads);
  auto lb = (*dropped)->TrainStep(batch, b.plan, b.params, &b.grads);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_NE(la->loss_sum, lb->loss_sum);
  // A second step on the same parameters draws a new mask: its dense
  // gradients differ from the first's.
  std::vector<std::vector<float>> first;
  for (const TableSpec& t : (*dropped)->tables()) first.push_back(b.store.grad(t.id));
  ASSERT_TRUE((*dropped)->TrainStep(batch, b.plan, b.params, &b.grads).ok());
  bool changed = false;
  for (const TableSpec& t : (*dropped)->tables()) {
    if (t.kind == TableKind::kDense) changed = changed || b.store.grad(t.id) != first[t.id];
  }
  EXPECT_TRUE(changed);
}

INSTANTIATE_TEST_SUITE_P(Towers, ModelDropoutTest,
                         ::testing::Values("wide_deep", "dlrm", "dcn_v2", "deepfm"));

TEST(TowerDropout, WorkersDrawDifferentMasks) {
  ModelOptions o = TinyOptions("dlrm");
  o.dropout = 0.5f;
  ModelOptions other = o;
  other.dropout_stream = 1;
  auto m0 = CreateModel(o), m0_again = CreateModel(o), m1 = CreateModel(other);
  ASSERT_TRUE(m0.ok() && m0_again.ok() && m1.ok());
  std::mt19937 rng(9);
  Batch batch = RandomBatch(32, 3, 3, 2, 30, rng);
  LocalStep s0(**m0, batch, 0.5f), s0b(**m0_again, batch, 0.5f), s1(**m1, batch, 0.5f);
  auto l0 = (*m0)->TrainStep(batch, s0.plan, s0.params, &s0.grads);
  auto l0b = (*m0_again)->TrainStep(batch, s0b.plan, s0b.params, &s0b.grads);
  auto l1 = (*m1)->TrainStep(batch, s1.plan, s1.params, &s1.grads);
  ASSERT_TRUE(l0.ok() && l0b.ok() && l1.ok());
  EXPECT_EQ(l0->loss_sum, l0b->loss_sum);  // deterministic for one worker
  EXPECT_NE(l0->loss_sum, l1->loss_sum);
}

TEST(TowerDropout, ModelsWithoutTowersRefuseIt) {
  for (const char* name : {"lr", "deep_tower"}) {
    ModelOptions o = TinyOptions(name);
    o.dropout = 0.2f;
    auto m = CreateModel(o);
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status();
  }
  ModelOptions o = TinyOptions("dlrm");
  o.dropout = 1.0f;
  EXPECT_EQ(CreateModel(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TableWeightDecay, OverridesReachTheNamedTablesAndTheLastMatchWins) {
  ModelOptions o = TinyOptions("dlrm");
  o.sparse_optimizer.weight_decay = 0.5f;
  o.dense_optimizer.weight_decay = 0.25f;
  o.table_weight_decay = {{"emb.*", 1e-4f}, {"emb.C2", 0.0f}, {"top.0.weight", 3e-3f}};
  auto m = CreateModel(o);
  ASSERT_TRUE(m.ok()) << m.status();
  int seen = 0;
  for (const TableSpec& t : (*m)->tables()) {
    float want = t.kind == TableKind::kSparse ? 0.5f : 0.25f;
    if (t.name.rfind("emb.", 0) == 0) want = t.name == "emb.C2" ? 0.0f : 1e-4f;
    if (t.name == "top.0.weight") want = 3e-3f;
    EXPECT_EQ(t.optimizer.weight_decay, want) << t.name;
    ++seen;
  }
  EXPECT_GT(seen, 5);
}

TEST(TableWeightDecay, ANameNoTableHasIsRefusedListingTheTables) {
  ModelOptions o = TinyOptions("dlrm");
  o.table_weight_decay = {{"embedding.C1", 1e-4f}};
  auto m = CreateModel(o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("'embedding.C1'"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("emb.C1"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace pstrain::worker
