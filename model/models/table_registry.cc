#include "model/models/table_registry.h"

#include "model/models/model.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

float WeightDecay(const std::vector<std::pair<std::string, float>>& overrides,
                  const std::string& table, float fallback) {
  float value = fallback;
  for (const auto& [pattern, decay] : overrides) {
    if (TableNameMatches(pattern, table)) value = decay;
  }
  return value;
}

}  // namespace

bool TableNameMatches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return pattern == name;
}

absl::Status CheckTablePatterns(const char* flag,
                                const std::vector<std::pair<std::string, float>>& overrides,
                                const std::vector<TableSpec>& tables) {
  for (const auto& entry : overrides) {
    bool matched = false;
    for (const TableSpec& t : tables) matched = matched || TableNameMatches(entry.first, t.name);
    if (matched) continue;
    std::string names;
    for (const TableSpec& t : tables) {
      if (names.size() > 300) {
        absl::StrAppend(&names, ", ...");
        break;
      }
      absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
    }
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no table of the model is named '",
                                                   entry.first, "' (its tables: ", names, ")"));
  }
  return absl::OkStatus();
}

InitializerConfig LinearWeightInit(int fan_in, uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(fan_in)) : 0.0f;
  init.seed = seed;
  return init;
}

InitializerConfig HeInit(int fan_in, uint64_t seed) {
  InitializerConfig init;
  init.kind = InitKind::kUniform;
  init.scale = std::sqrt(6.0f / static_cast<float>(fan_in));
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
  spec.optimizer.weight_decay = WeightDecay(weight_decay_, spec.name, spec.optimizer.weight_decay);
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
  spec.optimizer.weight_decay = WeightDecay(weight_decay_, spec.name, spec.optimizer.weight_decay);
  spec.init = init;
  tables_.push_back(std::move(spec));
  sparse_ids_.push_back(tables_.back().id);
  sparse_fields_.push_back(std::move(fields));
  return tables_.back().id;
}

std::string SparseFieldName(int field) { return absl::StrCat("C", field + 1); }

namespace {

std::string CleanFieldName(const ModelOptions& options, int field) {
  if (field < 0 || static_cast<size_t>(field) >= options.field_names.size()) return "";
  std::string name = options.field_names[field];
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name;
}

}  // namespace

std::string SparseFieldName(const ModelOptions& options, int field) {
  const std::string name = CleanFieldName(options, field);
  if (name.empty()) return SparseFieldName(field);
  for (int f = 0; f < field; ++f) {
    if (CleanFieldName(options, f) == name) return SparseFieldName(field);
  }
  return name;
}

}  // namespace pstrain::worker
