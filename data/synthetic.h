// Synthetic click data: Criteo-format TSV files and in-memory Batches drawn
// from a SyntheticWorld (synthetic_world.h), with the oracle metrics of its
// hidden teacher (the best any model can do on the rows written).
// Functions are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/schema.h"
#include "data/synthetic_world.h"

namespace pstrain::worker {

struct SyntheticReport {
  int64_t rows = 0;
  double positive_rate = 0;
  // Exact AUC and mean log loss of the teacher's probabilities against the
  // labels written (NaN AUC if all labels are equal).
  double oracle_auc = 0;
  double oracle_logloss = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // wall time of the whole call
};

// Writes rows [first_row, first_row + rows) of the world of `options` to `path` as
// Criteo-format TSV (through a temporary file renamed into place).
// Deterministic for given options. Errors: InvalidArgument (options), I/O.
absl::StatusOr<SyntheticReport> WriteSynthetic(const SyntheticOptions& options,
                                               const std::string& path);

// Rows [first_row, first_row + num_rows) of `world` as one Batch, exactly as
// parsing the written text with `schema` would give (without the text).
// InvalidArgument when the schema's shape differs from the world's or
// num_rows < 0.
absl::StatusOr<std::shared_ptr<const Batch>> GenerateBatch(const SyntheticWorld& world,
                                                           int64_t first_row, int num_rows,
                                                           const Schema& schema);

}  // namespace pstrain::worker
