// Scoring with an exported model, shared by `pstrain predict` and
// `pstrain serve`.
//
// A LoadedModel is one version of a model directory (written by
// --save_model): its tables in lookup form, immutable once built, so any
// number of threads score with it at once. Each scoring thread brings a
// ScoreScratch (the Model instance and its buffers: Model is not
// thread-safe); a LoadedModel keeps a pool of them. Ids the model never saw
// read as on the servers during training: zeros for tables with admission
// or eviction, the tables' deterministic initializer rows otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/optim/initializer.h"
#include "data/batch.h"
#include "model/models/model.h"
#include "serve/model_io.h"

namespace pstrain::worker {

// A Model instance and the buffers of one scoring call.
struct ScoreScratch {
  std::unique_ptr<Model> model;
  BatchPlan plan;
  ParamRefs params;
  std::vector<std::vector<float>> rows;  // per sparse table: the batch's rows
};

class LoadedModel {
 public:
  // Reads DIR (verifying every checksum) and builds the lookup tables.
  // `version` is the hex checksum of DIR/model.json as read, which names the
  // model's content (the manifest holds every table's checksum).
  // A versioned export folder (serve/model_versions.h): LATEST's version,
  // its base with the deltas after it applied; `version` is its folder name
  // ("v00000012").
  static absl::StatusOr<std::shared_ptr<LoadedModel>> Load(const std::string& dir);
  static absl::StatusOr<std::shared_ptr<LoadedModel>> FromSaved(SavedModel saved,
                                                                std::string version);

  // Double buffering (pstrain serve): a copy of this version, and a delta
  // applied in place. ApplyDelta REQUIRES that no thread uses the model
  // (nothing else holds it); it checks the delta against the model before it
  // changes anything (FailedPrecondition: not the next version of the same
  // base, or other tables).
  absl::StatusOr<std::shared_ptr<LoadedModel>> Clone() const;
  absl::Status ApplyDelta(const SavedModel& delta);
  // Where the version stands in its export folder (seq 0: not a version).
  const ExportInfo& exported() const { return saved_.exported; }

  const Schema& schema() const { return saved_.schema; }
  const ModelOptions& options() const { return saved_.model; }
  int64_t step() const { return saved_.step; }
  const std::string& version() const { return version_; }
  // Embedding rows over all sparse tables (live rows: a delta's removed ids
  // are not counted).
  uint64_t sparse_rows() const;

  // The model's outputs (one; a model file's heads).
  const std::vector<ModelHead>& heads() const { return heads_; }

  // Every row's output of each head into `probs` (resized), [rows x
  // heads] row-major: click probabilities (a regression head's values).
  // Thread-safe. REQUIRES: `scratch` from this model's AcquireScratch().
  absl::Status Score(const Batch& batch, ScoreScratch* scratch, std::vector<float>* probs) const;

  // A scratch for Score: from the pool, or new. Thread-safe.
  absl::StatusOr<std::unique_ptr<ScoreScratch>> AcquireScratch() const;
  // Returns a scratch to the pool (dropped when the pool is full).
  void ReleaseScratch(std::unique_ptr<ScoreScratch> scratch) const;

 private:
  struct SparseTable {
    TableValues* values = nullptr;
    absl::flat_hash_map<uint64_t, uint32_t> row_of;
    std::unique_ptr<optim::Initializer> init;
  };

  LoadedModel() = default;
  absl::Status Build();

  SavedModel saved_;
  std::string version_;
  std::vector<uint32_t> sparse_ids_;  // TableSpec::id of each sparse table, in plan order
  std::vector<ModelHead> heads_;
  std::vector<SparseTable> sparse_;
  std::vector<const float*> dense_;  // by TableSpec::id; null for sparse tables

  mutable absl::Mutex pool_mu_;
  mutable std::vector<std::unique_ptr<ScoreScratch>> pool_ ABSL_GUARDED_BY(pool_mu_);
};

// Checks that a model built from the export's options has the export's
// tables (name, kind, size, dim), naming the first that differs.
absl::Status CheckSameTables(const std::vector<TableSpec>& model, const SavedModel& saved);

}  // namespace pstrain::worker
