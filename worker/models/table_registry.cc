#include "worker/models/table_registry.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {

InitializerConfig LinearWeightInit(int fan_in, uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(fan_in)) : 0.0f;
  init.seed = seed;
  return init;
}

InitializerConfig EmbeddingInit(int dim, uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  init.seed = seed;
  return init;
}

InitializerConfig ZeroInit(uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kZeros;
  init.scale = 0.0f;
  init.seed = seed;
  return init;
}

uint32_t TableRegistry::AddDense(std::string name, uint64_t size, InitializerConfig init) {
  TableSpec spec;
  spec.id = static_cast<uint32_t>(tables_.size());
  spec.name = std::move(name);
  spec.kind = TableKind::kDense;
  spec.size = size;
  spec.dim = 0;
  spec.optimizer = dense_optimizer_;
  spec.init = init;
  tables_.push_back(std::move(spec));
  return tables_.back().id;
}

uint32_t TableRegistry::AddSparse(std::string name, uint32_t dim, InitializerConfig init,
                                  std::vector<int> fields) {
  TableSpec spec;
  spec.id = static_cast<uint32_t>(tables_.size());
  spec.name = std::move(name);
  spec.kind = TableKind::kSparse;
  spec.size = 0;
  spec.dim = dim;
  spec.optimizer = sparse_optimizer_;
  spec.init = init;
  tables_.push_back(std::move(spec));
  sparse_ids_.push_back(tables_.back().id);
  sparse_fields_.push_back(std::move(fields));
  return tables_.back().id;
}

std::string SparseFieldName(int field) { return absl::StrCat("C", field + 1); }

}  // namespace pstrain::worker
