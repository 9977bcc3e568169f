// ShuffleBuffer: a row-level shuffle window of fixed capacity. Once full,
// each incoming row takes the place of a uniformly chosen resident row,
// which goes out (the reservoir scheme of tf.data's shuffle). The order is a
// pure function of the seed and the input order. Owned and used by one
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/batch_builder.h"
#include "data/parser.h"

namespace pstrain::worker {

class ShuffleBuffer {
 public:
  // `single_hot`: every row has exactly one id per field (then ids are kept
  // in one flat array); `num_extra_labels`: the schema's extra_labels.
  // REQUIRES: capacity > 0.
  ShuffleBuffer(size_t capacity, int num_dense, int num_sparse, bool single_hot,
                int num_extra_labels = 0);

  ShuffleBuffer(const ShuffleBuffer&) = delete;
  ShuffleBuffer& operator=(const ShuffleBuffer&) = delete;

  // Restarts the random sequence. Does not drop resident rows.
  void Reseed(uint64_t seed);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == capacity_; }

  // REQUIRES: !full(); row shaped for this buffer (and single-hot if so).
  void Insert(const ParsedRow& row);

  // Moves a uniformly chosen resident row into `out`. Returns false (and
  // keeps the row) when `out` refuses it. REQUIRES: !empty().
  bool PopRandomInto(BatchBuilder* out);

 private:
  uint64_t NextRandom();
  void MoveSlot(size_t from, size_t to);

  const size_t capacity_;
  const int num_dense_;
  const int num_sparse_;
  const bool single_hot_;
  const int num_labels_;                   // 1 + the extra labels
  size_t size_ = 0;
  uint64_t rng_state_ = 0;
  std::vector<float> labels_;              // [capacity * num_labels]: the label, then the extra ones
  std::vector<float> dense_;               // [capacity * num_dense]
  std::vector<uint64_t> flat_ids_;         // single-hot: [capacity * num_sparse]
  std::vector<uint32_t> iota_ends_;        // single-hot: 1, 2, ..., num_sparse
  std::vector<std::vector<uint64_t>> ids_; // multi-hot: per slot
  std::vector<uint32_t> ends_;             // multi-hot: [capacity * num_sparse]
};

}  // namespace pstrain::worker
