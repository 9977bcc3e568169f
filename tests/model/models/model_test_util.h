// Test helpers for the models: random Batches built by hand, and a local
// parameter store (dense arrays + sparse rows created on first use from the
// table's InitializerConfig) that binds ParamRefs/GradRefs for a plan and
// applies plain SGD. Single-threaded.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "common/hash.h"
#include "data/batch.h"
#include "model/models/model.h"

namespace pstrain::worker::testing {

// A batch with `size` rows; each field's bag holds 1..max_bag ids drawn from
// [0, id_range) (so ids repeat); dense features in [0, 2); labels 0/1.
inline Batch RandomBatch(int size, int num_dense, int num_sparse, int max_bag, int id_range,
                         std::mt19937& rng) {
  Batch b;
  b.size = size;
  b.num_dense = num_dense;
  b.num_sparse = num_sparse;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> bag(1, max_bag), id(0, id_range - 1);
  for (int r = 0; r < size; ++r) b.labels.push_back(unit(rng) < 0.5f ? 1.0f : 0.0f);
  for (int i = 0; i < size * num_dense; ++i) b.dense.push_back(2.0f * unit(rng));
  b.ids.resize(num_sparse);
  b.offsets.resize(num_sparse);
  for (int f = 0; f < num_sparse; ++f) {
    b.offsets[f].push_back(0);
    for (int r = 0; r < size; ++r) {
      const int n = bag(rng);
      for (int k = 0; k < n; ++k) b.ids[f].push_back(static_cast<uint64_t>(id(rng)) * 1000 + f);
      b.offsets[f].push_back(static_cast<uint32_t>(b.ids[f].size()));
    }
  }
  return b;
}

// Fills v per `init`, deterministically from (init.seed, salt).
inline void FillInit(const InitializerConfig& init, uint64_t salt, float* v, size_t n) {
  std::mt19937_64 rng(Mix64(init.seed ^ Mix64(salt)));
  for (size_t i = 0; i < n; ++i) {
    const float u = UnitFloat(rng());
    switch (init.kind) {
      case InitKind::kZeros: v[i] = 0.0f; break;
      case InitKind::kConstant: v[i] = init.scale; break;
      case InitKind::kUniform: v[i] = (2.0f * u - 1.0f) * init.scale; break;
      case InitKind::kNormal: {
        const float u2 = UnitFloat(rng());
        v[i] = init.scale * std::sqrt(-2.0f * std::log(1.0f - u)) * std::cos(6.2831853f * u2);
        break;
      }
    }
  }
}

class LocalParams {
 public:
  // `override_scale` > 0 draws every table U(-scale, scale) instead of its
  // initializer (zero-initialized tables make weak gradient tests).
  explicit LocalParams(const Model& model, float override_scale = 0.0f)
      : model_(model), override_scale_(override_scale) {
    const auto& tables = model.tables();
    dense_.resize(tables.size());
    sparse_.resize(tables.size());
    rows_.resize(tables.size());
    grads_.resize(tables.size());
    for (const TableSpec& t : tables) {
      if (t.kind == TableKind::kDense) {
        dense_[t.id].resize(t.size);
        Fill(t, 0, dense_[t.id].data(), t.size);
      }
    }
  }

  // Binds the parameters of `plan` (gathering sparse rows) and gradient space.
  void Bind(const BatchPlan& plan, ParamRefs* params, GradRefs* grads) {
    const auto& tables = model_.tables();
    params->tables.assign(tables.size(), nullptr);
    grads->tables.assign(tables.size(), nullptr);
    const auto& sparse = model_.sparse_tables();
    for (const TableSpec& t : tables) {
      if (t.kind == TableKind::kDense) {
        params->tables[t.id] = dense_[t.id].data();
        grads_[t.id].assign(t.size, NAN);  // the model must overwrite every element
      }
    }
    for (size_t s = 0; s < sparse.size(); ++s) {
      const TableSpec& t = tables[sparse[s]];
      const auto& ids = plan.lookups[s].unique_ids;
      rows_[t.id].resize(ids.size() * t.dim);
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::vector<float>& row = Row(t, ids[i]);
        std::copy(row.begin(), row.end(), rows_[t.id].begin() + i * t.dim);
      }
      params->tables[t.id] = rows_[t.id].data();
      grads_[t.id].assign(ids.size() * t.dim, NAN);
    }
    for (const TableSpec& t : tables) grads->tables[t.id] = grads_[t.id].data();
  }

  // w -= lr * grad for every bound table (sparse rows written back).
  void ApplySgd(const BatchPlan& plan, float lr) {
    const auto& tables = model_.tables();
    for (const TableSpec& t : tables) {
      if (t.kind != TableKind::kDense) continue;
      for (size_t i = 0; i < t.size; ++i) dense_[t.id][i] -= lr * grads_[t.id][i];
    }
    const auto& sparse = model_.sparse_tables();
    for (size_t s = 0; s < sparse.size(); ++s) {
      const TableSpec& t = tables[sparse[s]];
      const auto& ids = plan.lookups[s].unique_ids;
      for (size_t i = 0; i < ids.size(); ++i) {
        std::vector<float>& row = Row(t, ids[i]);
        for (uint32_t k = 0; k < t.dim; ++k) row[k] -= lr * grads_[t.id][i * t.dim + k];
      }
    }
  }

  std::vector<float>& dense(uint32_t table) { return dense_[table]; }
  std::vector<float>& bound_rows(uint32_t table) { return rows_[table]; }
  const std::vector<float>& grad(uint32_t table) const { return grads_[table]; }

 private:
  void Fill(const TableSpec& t, uint64_t salt, float* v, size_t n) {
    if (override_scale_ > 0) {
      InitializerConfig init;
      init.kind = InitKind::kUniform;
      init.scale = override_scale_;
      init.seed = 99;
      FillInit(init, Mix64(t.id) ^ salt, v, n);
    } else {
      FillInit(t.init, Mix64(t.id) ^ salt, v, n);
    }
  }
  std::vector<float>& Row(const TableSpec& t, uint64_t id) {
    auto [it, inserted] = sparse_[t.id].try_emplace(id);
    if (inserted) {
      it->second.resize(t.dim);
      Fill(t, Mix64(id + 1), it->second.data(), t.dim);
    }
    return it->second;
  }

  const Model& model_;
  float override_scale_;
  std::vector<std::vector<float>> dense_;
  std::vector<std::unordered_map<uint64_t, std::vector<float>>> sparse_;
  std::vector<std::vector<float>> rows_;
  std::vector<std::vector<float>> grads_;
};

// `model` planned on `batch`, with parameters from a LocalParams (drawn
// U(-scale, scale)) bound for a step. Use as
//   LocalStep step(model, batch, 0.5f);
//   auto& [plan, store, params, grads] = step;
struct LocalStep {
  LocalStep(const Model& model, const Batch& batch, float scale) : store(model, scale) {
    model.Plan(batch, &plan);
    store.Bind(plan, &params, &grads);
  }
  BatchPlan plan;
  LocalParams store;
  ParamRefs params;
  GradRefs grads;
};

// Tiny shapes for gradient checks.
inline ModelOptions TinyOptions(const std::string& name) {
  ModelOptions o;
  o.name = name;
  o.num_dense = 3;
  o.num_sparse = 3;
  o.embedding_dim = 4;
  o.bottom_mlp = {5, 4};
  o.top_mlp = {6, 3};
  o.deep_mlp = {6, 4};
  o.cross_layers = 2;
  o.cross_rank = 3;
  o.seed = 5;
  return o;
}

}  // namespace pstrain::worker::testing
