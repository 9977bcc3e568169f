// BatchBuilder: appends parsed rows into a Batch (CSR sparse fields) and
// hands the finished Batch out as an immutable shared_ptr. A batch whose
// last holder drops it comes back to its builder's pool, and a later batch
// reuses its arrays (no allocation, no page faults once they have grown). Plus cheap batch
// utilities: validation, slicing, splitting and concatenation.
//
// A BatchBuilder is owned and used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/parser.h"

namespace pstrain::worker {

// The limits of one Batch.
inline constexpr int kMaxBatchRows = std::numeric_limits<int>::max();
inline constexpr size_t kMaxIdsPerField = std::numeric_limits<uint32_t>::max();

// What a columnar producer (ParquetRows::AppendRows and the row sources
// above it) appended to a BatchBuilder: `rows`, and `end` when its input
// has no more rows.
struct RowsAppended {
  int64_t rows = 0;
  bool end = false;
};

class BatchBuilder {
 public:
  // `expected_rows` only reserves memory. `num_extra_labels`: the schema's
  // extra_labels, taken from each row.
  BatchBuilder(int num_dense, int num_sparse, int expected_rows = 0, int num_extra_labels = 0);

  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;

  // Appends one row. REQUIRES: row shaped for (num_dense, num_sparse).
  // Returns false (appending nothing) when the batch would exceed its
  // limits: 2^31 - 1 rows or 2^32 - 1 ids in one field.
  bool Append(const ParsedRow& row) {
    return Append(row.label, row.dense.data(), row.ids.data(), row.field_end.data(),
                  row.extra_labels.data());
  }
  // The same from raw arrays: dense[num_dense], field_end[num_sparse] (the
  // end of each field's ids in `ids`, as in ParsedRow), extra_labels
  // [num_extra_labels] (ignored when there are none).
  bool Append(float label, const float* dense, const uint64_t* ids, const uint32_t* field_end,
              const float* extra_labels = nullptr);
  // Appends row `r` of `batch`. Same limits. REQUIRES: same shape.
  bool AppendFrom(const Batch& batch, int r);

  // The columnar path (ParquetRows::AppendRows): the batch being built,
  // for a producer that appends n whole rows to each of its arrays itself
  // (labels, extra_labels, dense, and each field's ids and offsets), then
  // calls AddedRows(n). REQUIRES: the batch's limits (kMaxBatchRows,
  // kMaxIdsPerField) kept, >= 1 id a row and field. The pointer is valid
  // until Finish().
  Batch* batch_for_append() { return batch_.get(); }
  void AddedRows(int n) { batch_->size += n; }

  int size() const { return batch_->size; }
  bool empty() const { return batch_->size == 0; }

  // Returns the batch built so far and starts a new, empty one.
  // `end`: the reader's position after the batch's last row.
  std::shared_ptr<const Batch> Finish(SourcePosition end = {});

 private:
  class Pool;
  void Reset();
  bool Fits(int f, size_t n) const;

  int num_dense_;
  int num_sparse_;
  int expected_rows_;
  int num_extra_labels_;
  // Batches given back (shared with the deleters of the batches handed out,
  // which may outlive the builder).
  std::shared_ptr<Pool> pool_;
  std::unique_ptr<Batch> batch_;
};

// An empty batch of the given shape (offsets hold the single 0).
Batch EmptyBatch(int num_dense, int num_sparse, int num_extra_labels = 0);

// OK when the batch's arrays are consistent with size/num_dense/num_sparse
// (sizes, monotone offsets starting at 0, >= 1 id per row and field);
// InvalidArgument naming the first inconsistency otherwise.
absl::Status ValidateBatch(const Batch& batch);

// Rows [begin, end) of `batch` as a new batch (copies O(rows + ids)).
// REQUIRES: 0 <= begin <= end <= batch.size.
Batch SliceBatch(const Batch& batch, int begin, int end);

// `batch` cut into consecutive batches of `batch_size` rows (the last one
// may be smaller). A batch that already fits is returned as is, unshared.
// REQUIRES: batch_size > 0.
std::vector<std::shared_ptr<const Batch>> SplitBatch(std::shared_ptr<const Batch> batch,
                                                     int batch_size);

// The rows of all `batches`, in order, as one batch. InvalidArgument when
// shapes differ; ResourceExhausted when the result would exceed a Batch's
// limits.
absl::StatusOr<std::shared_ptr<const Batch>> ConcatBatches(
    const std::vector<std::shared_ptr<const Batch>>& batches);

// True when both batches hold exactly the same rows.
bool BatchesEqual(const Batch& a, const Batch& b);

}  // namespace pstrain::worker
