// Batch: a block of training rows in a compute-friendly layout, produced by
// the data readers and consumed by the models. Immutable once built; safe to
// share between threads for reading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain::worker {

// Where a reader of one shard stands in it: after the rows it has handed
// out, the next is in range `range` of the shard (file_set.h's FileRange,
// in order), at row `row` of the file's row group `row_group` (a Parquet
// range), at byte `offset` of the file (the start of a line of a plain text
// file), or at the range's start (`row_group` and `offset` -1). Known
// (range >= 0) only where the rows come in file order: a reader with one
// thread and no shuffle buffer, outside compressed files. `file`: the
// range's file, for messages.
struct SourcePosition {
  int32_t range = -1;
  int32_t row_group = -1;
  int64_t row = 0;
  int64_t offset = -1;
  std::string file;

  bool known() const { return range >= 0; }
};

// "FILE, row group G, row R", "FILE, the line at byte B", "the start of
// FILE" or "the end of the
// shard's data" (no file: past the last range).
inline std::string DescribePosition(const SourcePosition& p) {
  if (p.file.empty()) return "the end of the shard's data";
  if (p.offset >= 0) return p.file + ", the line at byte " + std::to_string(p.offset);
  if (p.row_group < 0) return "the start of " + p.file;
  return p.file + ", row group " + std::to_string(p.row_group) + ", row " + std::to_string(p.row);
}

struct Batch {
  int size = 0;        // number of rows
  int num_dense = 0;   // dense features per row
  int num_sparse = 0;  // sparse (categorical) fields per row

  std::vector<float> labels;  // [size], 0 or 1
  // The schema's extra_labels (a multi-task model's other heads' labels),
  // [size x num_extra_labels] row-major; NaN: the row has no such label.
  int num_extra_labels = 0;
  std::vector<float> extra_labels;
  // [size * num_dense], row-major, already transformed (log(1 + max(x, 0))).
  std::vector<float> dense;
  // Sparse fields in CSR form, one per field: the ids of row r in field f are
  // ids[f][offsets[f][r] .. offsets[f][r + 1]). Every row has at least one id
  // per field (an empty token maps to the field's "missing" id).
  std::vector<std::vector<uint64_t>> ids;       // [num_sparse][...]
  std::vector<std::vector<uint32_t>> offsets;   // [num_sparse][size + 1]
  // The reader's position after this batch's last row (unknown where it
  // cannot say: see SourcePosition).
  SourcePosition end;
};

// Label `label` of row r: 0 the first (labels), k > 0 extra label k - 1.
inline float LabelOf(const Batch& b, int label, int r) {
  return label == 0 ? b.labels[r]
                    : b.extra_labels[static_cast<size_t>(r) * b.num_extra_labels + (label - 1)];
}

}  // namespace pstrain::worker
