// A small dlrm export with every table filled with random values (sparse
// tables hold a few ids each), for the model file tests.
#pragma once

#include <random>

#include <gtest/gtest.h>

#include "model/models/model.h"
#include "serve/model_io.h"

namespace pstrain::worker {

inline SavedModel RandomModel(unsigned seed = 5) {
  SavedModel m;
  m.model.name = "dlrm";
  m.model.num_dense = 13;
  m.model.num_sparse = 26;
  m.model.embedding_dim = 4;
  m.model.bottom_mlp = {8, 4};
  m.model.top_mlp = {8};
  m.schema.num_dense = 13;
  m.schema.num_sparse = 26;
  m.step = 7;
  auto model = CreateModel(m.model);
  EXPECT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  for (const TableSpec& spec : (*model)->tables()) {
    TableValues t;
    t.spec = spec;
    if (spec.kind == TableKind::kDense) {
      t.dense.resize(spec.size);
      for (float& v : t.dense) v = u(rng);
    } else {
      for (uint64_t id = 0; id < 5; ++id) t.ids.push_back(id * 977 + spec.id);
      t.rows.resize(t.ids.size() * spec.dim);
      for (float& v : t.rows) v = u(rng);
    }
    m.tables.push_back(std::move(t));
  }
  return m;
}

}  // namespace pstrain::worker
