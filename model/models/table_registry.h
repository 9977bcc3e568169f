// TableRegistry: the list of parameter tables a model declares while it is
// built (TableSpec::id == position), with the batch fields each sparse table
// serves, plus the initializers the models share. Filled once by a model's
// constructor, read-only afterwards; not thread-safe while being filled.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/table_spec.h"

namespace pstrain::worker {
struct ModelOptions;
}

namespace pstrain::worker {

// Linear weights: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's nn.Linear
// default bound).
InitializerConfig LinearWeightInit(int fan_in, uint64_t seed);
// U(-sqrt(6 / fan_in), sqrt(6 / fan_in)) (He et al. 2015): Var = 2 / fan_in,
// which keeps the activations' scale through ReLU layers (deep_tower's
// hidden layers, a model file's mlp with "init": "he").
InitializerConfig HeInit(int fan_in, uint64_t seed);
// Embedding rows: U(-1/sqrt(dim), 1/sqrt(dim)). The DLRM reference scales by
// 1/sqrt(num_rows), which does not exist for unbounded hashed ids; 1/sqrt(dim)
// keeps a row's norm near 1/sqrt(3) whatever the dimension.
InitializerConfig EmbeddingInit(int dim, uint64_t seed);
// Linear-model weights (and biases, without uniform_biases) start at zero.
InitializerConfig ZeroInit(uint64_t seed);

class TableRegistry {
 public:
  // `weight_decay`: per-table overrides of the optimizers' weight_decay
  // (ModelOptions::table_weight_decay).
  // `uniform_biases`: BiasInit() is PyTorch nn.Linear's U(+-1/sqrt(fan_in)),
  // else zeros (ModelOptions::uniform_biases).
  TableRegistry(OptimizerConfig dense_optimizer, OptimizerConfig sparse_optimizer,
                std::vector<std::pair<std::string, float>> weight_decay = {},
                bool uniform_biases = true)
      : dense_optimizer_(dense_optimizer),
        sparse_optimizer_(sparse_optimizer),
        weight_decay_(std::move(weight_decay)),
        uniform_biases_(uniform_biases) {}

  // The initializer of a Linear layer's bias with `fan_in` inputs.
  InitializerConfig BiasInit(int fan_in, uint64_t seed) const {
    return uniform_biases_ ? LinearWeightInit(fan_in, seed) : ZeroInit(seed);
  }

  // Adds a dense table of `size` floats (dense optimizer); returns its id.
  uint32_t AddDense(std::string name, uint64_t size, InitializerConfig init);
  // Adds a sparse table of rows of `dim` floats serving the batch fields
  // `fields`, in order (sparse optimizer); returns its id.
  uint32_t AddSparse(std::string name, uint32_t dim, InitializerConfig init,
                     std::vector<int> fields);

  const std::vector<TableSpec>& tables() const { return tables_; }
  // Ids of the sparse tables in BatchPlan order.
  const std::vector<uint32_t>& sparse_ids() const { return sparse_ids_; }
  // Fields served by each sparse table, by BatchPlan position.
  const std::vector<std::vector<int>>& sparse_fields() const { return sparse_fields_; }

 private:
  OptimizerConfig dense_optimizer_;
  OptimizerConfig sparse_optimizer_;
  std::vector<std::pair<std::string, float>> weight_decay_;
  bool uniform_biases_;
  std::vector<TableSpec> tables_;
  std::vector<uint32_t> sparse_ids_;
  std::vector<std::vector<int>> sparse_fields_;
};

// True when `pattern` names table `name`: equal, or a prefix of it when the
// pattern ends in '*' ("emb.*").
bool TableNameMatches(const std::string& pattern, const std::string& name);

// InvalidArgument naming `flag` unless every pattern of `overrides` matches
// one of `tables`.
absl::Status CheckTablePatterns(const char* flag,
                                const std::vector<std::pair<std::string, float>>& overrides,
                                const std::vector<TableSpec>& tables);

// Criteo-style field name of sparse field f (0-based): "C1", "C2", ...
std::string SparseFieldName(int field);
// The name of sparse field f in the names of its tables: its column's name
// (options.field_names) with every character but letters, digits, '_' and
// '-' made '_', or C<f+1> when it has none or an earlier field has it.
std::string SparseFieldName(const ModelOptions& options, int field);

}  // namespace pstrain::worker
