// One step of a tiny DLRM against values computed independently: the
// forward pass, loss, every gradient and one Adagrad update written out
// here in plain loops over doubles (bottom MLP with ReLU after every layer,
// sum-pooled embedding bags, the dot interaction's strict lower triangle
// after the bottom output, top MLP with a linear last layer, sigmoid +
// binary cross-entropy summed over the batch, then Adagrad per element and
// row-wise on the batch mean). Nothing here calls the model's kernels.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

constexpr int kRows = 3, kDense = 2, kFields = 2, kDim = 2;
constexpr int kH1 = 3;   // bottom_mlp = {3, 2}: the last width is kDim
constexpr int kG1 = 3;   // top_mlp = {3}, then the width-1 logit layer
constexpr int kZ = kDim + 3;  // 3 vectors: 3 pairs
constexpr double kTol = 1e-5;

ModelOptions TinyDlrm() {
  ModelOptions o;
  o.name = "dlrm";
  o.num_dense = kDense;
  o.num_sparse = kFields;
  o.embedding_dim = kDim;
  o.bottom_mlp = {kH1, kDim};
  o.top_mlp = {kG1};
  o.seed = 3;
  return o;
}

// Row r's bag in field f; ids repeat across rows and within one bag's field.
Batch TinyBatch() {
  Batch b;
  b.size = kRows;
  b.num_dense = kDense;
  b.num_sparse = kFields;
  b.labels = {1, 0, 1};
  b.dense = {0.5f, 1.5f, 0.0f, 2.0f, 1.0f, 0.25f};
  b.ids = {{10, 11, 10, 12}, {20, 21, 20, 22}};
  b.offsets = {{0, 1, 3, 4}, {0, 1, 2, 4}};
  return b;
}

double Relu(double x) { return x > 0 ? x : 0; }

TEST(DlrmReference, ForwardGradientsAndAdagradStepEqualIndependentValues) {
  auto created = CreateModel(TinyDlrm());
  ASSERT_TRUE(created.ok()) << created.status();
  Model& model = **created;
  const Batch batch = TinyBatch();
  testing::LocalStep step(model, batch, 0.5f);
  auto& [plan, store, params, grads] = step;

  std::map<std::string, uint32_t> id_of;
  for (const TableSpec& t : model.tables()) id_of[t.name] = t.id;
  auto P = [&](const std::string& name) { return params.tables.at(id_of.at(name)); };
  const float *W0 = P("bottom.0.weight"), *b0 = P("bottom.0.bias");
  const float *W1 = P("bottom.1.weight"), *b1 = P("bottom.1.bias");
  const float *V0 = P("top.0.weight"), *c0 = P("top.0.bias");
  const float *V1 = P("top.1.weight"), *c1 = P("top.1.bias");
  // The bound row of `id` in field f, and its place among the plan's ids.
  auto slot = [&](int f, uint64_t id) {
    const auto& u = plan.lookups[f].unique_ids;
    return static_cast<size_t>(std::find(u.begin(), u.end(), id) - u.begin());
  };
  auto row = [&](int f, uint64_t id) {
    return params.tables[model.sparse_tables()[f]] + slot(f, id) * kDim;
  };

  // Reference forward and backward, sample by sample.
  double loss = 0;
  std::vector<double> probs(kRows);
  std::vector<double> dW0(kH1 * kDense), db0(kH1), dW1(kDim * kH1), db1(kDim);
  std::vector<double> dV0(kG1 * kZ), dc0(kG1), dV1(kG1), dc1(1);
  std::vector<std::vector<double>> demb(kFields);
  for (int f = 0; f < kFields; ++f) demb[f].assign(plan.lookups[f].unique_ids.size() * kDim, 0);
  for (int r = 0; r < kRows; ++r) {
    const float* x = &batch.dense[r * kDense];
    double h1[kH1], h2[kDim];
    for (int j = 0; j < kH1; ++j) {
      double s = b0[j];
      for (int i = 0; i < kDense; ++i) s += W0[j * kDense + i] * x[i];
      h1[j] = Relu(s);
    }
    for (int j = 0; j < kDim; ++j) {
      double s = b1[j];
      for (int i = 0; i < kH1; ++i) s += W1[j * kH1 + i] * h1[i];
      h2[j] = Relu(s);
    }
    double v[1 + kFields][kDim];  // h2, then each field's summed bag
    for (int k = 0; k < kDim; ++k) v[0][k] = h2[k];
    for (int f = 0; f < kFields; ++f) {
      for (int k = 0; k < kDim; ++k) v[1 + f][k] = 0;
      for (uint32_t e = batch.offsets[f][r]; e < batch.offsets[f][r + 1]; ++e) {
        for (int k = 0; k < kDim; ++k) v[1 + f][k] += row(f, batch.ids[f][e])[k];
      }
    }
    auto dot = [&](int a, int b) { return v[a][0] * v[b][0] + v[a][1] * v[b][1]; };
    const double z[kZ] = {h2[0], h2[1], dot(1, 0), dot(2, 0), dot(2, 1)};
    double g1[kG1];
    for (int j = 0; j < kG1; ++j) {
      double s = c0[j];
      for (int i = 0; i < kZ; ++i) s += V0[j * kZ + i] * z[i];
      g1[j] = Relu(s);
    }
    double logit = c1[0];
    for (int j = 0; j < kG1; ++j) logit += V1[j] * g1[j];
    const double p = 1 / (1 + std::exp(-logit)), y = batch.labels[r];
    probs[r] = p;
    loss += -(y * std::log(p) + (1 - y) * std::log(1 - p));

    const double dlogit = p - y;
    dc1[0] += dlogit;
    double dg1[kG1];
    for (int j = 0; j < kG1; ++j) {
      dV1[j] += dlogit * g1[j];
      dg1[j] = g1[j] > 0 ? dlogit * V1[j] : 0;
    }
    double dz[kZ] = {};
    for (int j = 0; j < kG1; ++j) {
      dc0[j] += dg1[j];
      for (int i = 0; i < kZ; ++i) {
        dV0[j * kZ + i] += dg1[j] * z[i];
        dz[i] += dg1[j] * V0[j * kZ + i];
      }
    }
    // z = [h2 | <v1,v0> <v2,v0> <v2,v1>]
    double dv[1 + kFields][kDim];
    for (int k = 0; k < kDim; ++k) {
      dv[0][k] = dz[k] + dz[2] * v[1][k] + dz[3] * v[2][k];
      dv[1][k] = dz[2] * v[0][k] + dz[4] * v[2][k];
      dv[2][k] = dz[3] * v[0][k] + dz[4] * v[1][k];
    }
    for (int f = 0; f < kFields; ++f) {
      for (uint32_t e = batch.offsets[f][r]; e < batch.offsets[f][r + 1]; ++e) {
        const size_t s = slot(f, batch.ids[f][e]);
        for (int k = 0; k < kDim; ++k) demb[f][s * kDim + k] += dv[1 + f][k];
      }
    }
    double dh2[kDim], dh1[kH1] = {};
    for (int j = 0; j < kDim; ++j) dh2[j] = h2[j] > 0 ? dv[0][j] : 0;
    for (int j = 0; j < kDim; ++j) {
      db1[j] += dh2[j];
      for (int i = 0; i < kH1; ++i) {
        dW1[j * kH1 + i] += dh2[j] * h1[i];
        dh1[i] += dh2[j] * W1[j * kH1 + i];
      }
    }
    for (int j = 0; j < kH1; ++j) {
      const double d = h1[j] > 0 ? dh1[j] : 0;
      db0[j] += d;
      for (int i = 0; i < kDense; ++i) dW0[j * kDense + i] += d * x[i];
    }
  }

  // The model's forward, loss and gradients.
  std::vector<float> predicted(kRows);
  ASSERT_TRUE(model.Predict(batch, plan, params, predicted).ok());
  for (int r = 0; r < kRows; ++r) EXPECT_NEAR(predicted[r], probs[r], kTol) << "row " << r;
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->num_samples, kRows);
  EXPECT_NEAR(out->loss_sum, loss, kTol);
  auto expect_grad = [&](const std::string& name, const std::vector<double>& want) {
    const std::vector<float>& got = store.grad(id_of.at(name));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], kTol) << name << "[" << i << "]";
  };
  expect_grad("bottom.0.weight", dW0);
  expect_grad("bottom.0.bias", db0);
  expect_grad("bottom.1.weight", dW1);
  expect_grad("bottom.1.bias", db1);
  expect_grad("top.0.weight", dV0);
  expect_grad("top.0.bias", dc0);
  expect_grad("top.1.weight", dV1);
  expect_grad("top.1.bias", dc1);
  for (int f = 0; f < kFields; ++f) {
    expect_grad(model.tables()[model.sparse_tables()[f]].name, demb[f]);
  }
  // The gradients are real: not all zero (ReLUs may switch some off).
  double norm = 0;
  for (double g : dV0) norm += g * g;
  EXPECT_GT(norm, 1e-6);

  // One Adagrad step on the batch mean (the servers scale by 1/samples):
  // per element for a dense table, row-wise for an embedding row.
  OptimizerConfig config;
  config.lr = 0.1f;
  config.initial_accumulator = 0.1f;
  config.kind = OptimizerKind::kAdagrad;
  auto adagrad = optim::Optimizer::Create(config);
  ASSERT_TRUE(adagrad.ok());
  const uint32_t top0 = id_of.at("top.0.weight");
  const std::vector<float> w = store.dense(top0);
  const std::vector<float>& g = store.grad(top0);
  std::vector<float> w_out(w.size()), acc(w.size());
  (*adagrad)->InitState(acc.data(), acc.size(), acc.size());
  optim::UpdateArgs args;
  args.weights_in = w.data();
  args.weights_out = w_out.data();
  args.state = acc.data();
  args.state_stride = acc.size();
  args.grads = g.data();
  args.n = w.size();
  args.scale = 1.0f / kRows;
  (*adagrad)->Apply(args);
  for (size_t i = 0; i < w.size(); ++i) {
    const double gm = dV0[i] / kRows, a = 0.1 + gm * gm;
    EXPECT_NEAR(acc[i], a, kTol) << i;
    EXPECT_NEAR(w_out[i], w[i] - 0.1 * gm / (std::sqrt(a) + 1e-8), kTol) << i;
  }

  config.kind = OptimizerKind::kRowwiseAdagrad;
  auto rowwise = optim::Optimizer::Create(config);
  ASSERT_TRUE(rowwise.ok());
  const size_t s = slot(0, 10);  // id 10: in two rows' bags, once twice
  std::vector<float> r_in(row(0, 10), row(0, 10) + kDim), r_out(kDim);
  float r_acc = 0;
  (*rowwise)->InitState(&r_acc, 1, kDim);
  args.weights_in = r_in.data();
  args.weights_out = r_out.data();
  args.state = &r_acc;
  args.state_stride = 1;
  args.grads = store.grad(model.sparse_tables()[0]).data() + s * kDim;
  args.n = kDim;
  (*rowwise)->Apply(args);
  double mean_sq = 0;
  for (int k = 0; k < kDim; ++k) mean_sq += std::pow(demb[0][s * kDim + k] / kRows, 2) / kDim;
  EXPECT_NEAR(r_acc, 0.1 + mean_sq, kTol);
  for (int k = 0; k < kDim; ++k) {
    EXPECT_NEAR(r_out[k], r_in[k] - 0.1 * (demb[0][s * kDim + k] / kRows) / (std::sqrt(0.1 + mean_sq) + 1e-8),
                kTol);
  }
}

}  // namespace
}  // namespace pstrain::worker
