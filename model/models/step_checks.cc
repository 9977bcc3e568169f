#include "model/models/step_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {

absl::Status CheckBatch(const Batch& batch, const ModelOptions& options, bool needs_labels) {
  const int rows = batch.size;
  if (rows <= 0) return absl::InvalidArgumentError("batch has no rows");
  if (batch.num_dense != options.num_dense || batch.num_sparse != options.num_sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch has ", batch.num_dense, " dense / ", batch.num_sparse, " sparse features, model ",
        options.name, " expects ", options.num_dense, " / ", options.num_sparse));
  }
  if (needs_labels && batch.labels.size() != static_cast<size_t>(rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch has ", batch.labels.size(), " labels for ", rows, " rows"));
  }
  if (batch.dense.size() != static_cast<size_t>(rows) * batch.num_dense) {
    return absl::InvalidArgumentError(absl::StrCat("batch.dense has ", batch.dense.size(),
                                                   " values, expected ", rows, " x ",
                                                   batch.num_dense));
  }
  if (batch.ids.size() != static_cast<size_t>(batch.num_sparse) ||
      batch.offsets.size() != static_cast<size_t>(batch.num_sparse)) {
    return absl::InvalidArgumentError("batch.ids/offsets do not have one entry per sparse field");
  }
  for (int f = 0; f < batch.num_sparse; ++f) {
    const std::vector<uint32_t>& off = batch.offsets[f];
    if (off.size() != static_cast<size_t>(rows) + 1 || off[0] != 0 ||
        off[rows] != batch.ids[f].size()) {
      return absl::InvalidArgumentError(absl::StrCat("field ", SparseFieldName(f),
                                                     ": offsets do not describe ids of ", rows,
                                                     " rows"));
    }
    bool sorted = true;
    for (int r = 0; r < rows; ++r) sorted &= off[r] <= off[r + 1];
    if (!sorted) {
      return absl::InvalidArgumentError(
          absl::StrCat("field ", SparseFieldName(f), ": offsets decrease"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlan(const Batch& batch, const BatchPlan& plan, const TableRegistry& tables) {
  const auto& fields = tables.sparse_fields();
  if (plan.lookups.size() != fields.size()) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", plan.lookups.size(),
                                                   " lookups, model has ", fields.size(),
                                                   " sparse tables (plan from another model?)"));
  }
  for (size_t s = 0; s < fields.size(); ++s) {
    const SparseLookup& lookup = plan.lookups[s];
    size_t total = 0;
    for (int f : fields[s]) total += batch.ids[f].size();
    uint32_t max_index = 0;
    for (uint32_t i : lookup.index) max_index = std::max(max_index, i);
    if (lookup.index.size() != total || (total > 0 && max_index >= lookup.unique_ids.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan of table ", tables.tables()[tables.sparse_ids()[s]].name,
          " does not match the batch (was Plan() called on this batch?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
