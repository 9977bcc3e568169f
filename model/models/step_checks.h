// Checks that a step's inputs are consistent before a model computes on
// them: a Batch against the model's shape, and a BatchPlan against the
// Batch and the model's sparse tables. The data comes from readers and other
// processes, so problems are InvalidArgument, never crashes. Stateless,
// thread-safe; O(ids) per call.
#pragma once

#include "absl/status/status.h"
#include "data/batch.h"
#include "model/models/model.h"
#include "model/models/table_registry.h"

namespace pstrain::worker {

// Rows > 0; feature counts as in `options`; labels (when needed), dense
// values and per-field CSR offsets (start 0, non-decreasing, end at the id
// count) sized for batch.size rows.
absl::Status CheckBatch(const Batch& batch, const ModelOptions& options, bool needs_labels);

// One lookup per sparse table, each with one index per id occurrence of the
// table's fields, every index inside unique_ids. REQUIRES: CheckBatch passed.
absl::Status CheckPlan(const Batch& batch, const BatchPlan& plan, const TableRegistry& tables);

}  // namespace pstrain::worker
