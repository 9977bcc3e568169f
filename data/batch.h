// Batch: a block of training rows in a compute-friendly layout, produced by
// the data readers and consumed by the models. Immutable once built; safe to
// share between threads for reading.
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain::worker {

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
};

// Label `label` of row r: 0 the first (labels), k > 0 extra label k - 1.
inline float LabelOf(const Batch& b, int label, int r) {
  return label == 0 ? b.labels[r]
                    : b.extra_labels[static_cast<size_t>(r) * b.num_extra_labels + (label - 1)];
}

}  // namespace pstrain::worker
