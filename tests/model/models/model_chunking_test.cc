// A batch larger than one compute chunk gives the gradients of its whole sum
// loss: the same as the sum over two TrainSteps on its halves.
#include <cmath>
#include <random>
#include <string>
#include <unordered_map>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

Batch Rows(const Batch& b, int begin, int count) {
  Batch out;
  out.size = count;
  out.num_dense = b.num_dense;
  out.num_sparse = b.num_sparse;
  out.labels.assign(b.labels.begin() + begin, b.labels.begin() + begin + count);
  out.dense.assign(b.dense.begin() + begin * b.num_dense,
                   b.dense.begin() + (begin + count) * b.num_dense);
  out.ids.resize(b.num_sparse);
  out.offsets.resize(b.num_sparse);
  for (int f = 0; f < b.num_sparse; ++f) {
    const uint32_t first = b.offsets[f][begin], end = b.offsets[f][begin + count];
    out.ids[f].assign(b.ids[f].begin() + first, b.ids[f].begin() + end);
    for (int r = 0; r <= count; ++r) out.offsets[f].push_back(b.offsets[f][begin + r] - first);
  }
  return out;
}

// Gradients of one step: dense tables as is, sparse rows keyed by id.
struct StepGrads {
  double loss = 0;
  std::vector<std::vector<float>> dense;
  std::vector<std::unordered_map<uint64_t, std::vector<float>>> sparse;
};

void AddStep(Model& model, testing::LocalParams& store, const Batch& batch, StepGrads* acc) {
  BatchPlan plan;
  model.Plan(batch, &plan);
  ParamRefs params;
  GradRefs grads;
  store.Bind(plan, &params, &grads);
  auto out = model.TrainStep(batch, plan, params, &grads);
  ASSERT_TRUE(out.ok()) << out.status();
  acc->loss += out->loss_sum;
  const auto& tables = model.tables();
  acc->dense.resize(tables.size());
  acc->sparse.resize(tables.size());
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense) continue;
    acc->dense[t.id].resize(t.size, 0.0f);
    for (size_t i = 0; i < t.size; ++i) acc->dense[t.id][i] += store.grad(t.id)[i];
  }
  const auto& sparse = model.sparse_tables();
  for (size_t s = 0; s < sparse.size(); ++s) {
    const TableSpec& t = tables[sparse[s]];
    for (size_t i = 0; i < plan.lookups[s].unique_ids.size(); ++i) {
      auto& row = acc->sparse[t.id][plan.lookups[s].unique_ids[i]];
      row.resize(t.dim, 0.0f);
      for (uint32_t k = 0; k < t.dim; ++k) row[k] += store.grad(t.id)[i * t.dim + k];
    }
  }
}

class ModelChunkingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelChunkingTest, GradientsOfABatchEqualTheSumOverItsHalves) {
  auto model_or = CreateModel(testing::TinyOptions(GetParam()));
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  std::mt19937 rng(6);
  Batch batch = testing::RandomBatch(700, 3, 3, 3, 60, rng);  // 3 chunks on the CPU
  testing::LocalParams store(model, 0.5f);
  StepGrads whole, halves;
  AddStep(model, store, batch, &whole);
  AddStep(model, store, Rows(batch, 0, 333), &halves);
  AddStep(model, store, Rows(batch, 333, 367), &halves);
  EXPECT_NEAR(whole.loss, halves.loss, 1e-5 * whole.loss);
  for (const TableSpec& t : model.tables()) {
    if (t.kind == TableKind::kDense) {
      for (size_t i = 0; i < t.size; ++i) {
        ASSERT_NEAR(whole.dense[t.id][i], halves.dense[t.id][i],
                    1e-4 * (1 + std::abs(halves.dense[t.id][i])))
            << t.name << "[" << i << "]";
      }
      continue;
    }
    ASSERT_EQ(whole.sparse[t.id].size(), halves.sparse[t.id].size()) << t.name;
    for (const auto& [id, row] : whole.sparse[t.id]) {
      const auto& other = halves.sparse[t.id].at(id);
      for (uint32_t k = 0; k < t.dim; ++k) {
        ASSERT_NEAR(row[k], other[k], 1e-4 * (1 + std::abs(other[k]))) << t.name << " id " << id;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelChunkingTest, ::testing::Values("lr", "wide_deep", "dlrm", "dcn_v2", "deepfm"));

}  // namespace
}  // namespace pstrain::worker
