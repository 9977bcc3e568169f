// CountMinSketch: bounded occurrence counts of 64-bit ids, for feature
// admission (SketchAdmission's min_count, admission_filter.h). kRows rows of `width` 16-bit
// saturating counters; an id's count is the minimum of its kRows counters,
// so it never undercounts (it may overcount when ids collide). Updates are
// conservative (only the counters at the minimum grow), which keeps the
// overcount small. Memory is fixed at creation: kRows * width * 2 bytes.
//
// The width is a power of two and counter i of a row serves the ids whose
// row hash has i in its low bits, so sketches of different widths merge
// without undercounting (MergeFrom). Not thread-safe: one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::server {

class CountMinSketch {
 public:
  static constexpr int kRows = 4;
  static constexpr uint16_t kMaxCount = UINT16_MAX;
  static constexpr size_t kMinWidth = 64;

  // The widest power-of-two width whose counters fit in `budget_bytes`
  // (at least kMinWidth).
  static size_t WidthForBudget(size_t budget_bytes);

  // `width` is rounded down to a power of two >= kMinWidth.
  explicit CountMinSketch(size_t width);

  size_t width() const { return width_; }
  size_t bytes() const { return cells_.size() * sizeof(uint16_t); }

  // The id's estimated count (>= the true count, saturating at kMaxCount).
  uint16_t Count(uint64_t id) const;
  // Adds `n` occurrences of the id (conservative update); returns the new
  // estimate.
  uint16_t Add(uint64_t id, uint32_t n = 1);

  // Takes the cellwise maximum with `other`'s counters, folding or spreading
  // when the widths differ: every id's count is then >= its count in either
  // sketch. Sketches of disjoint id sets (a server's parts, the old servers
  // of a re-shard) merge this way without undercounting any id, and merging
  // again (save, restore, save) does not inflate counts.
  void MergeFrom(const CountMinSketch& other);

  void Clear();

  // The counters, row-major (kRows * width), for checkpoints.
  std::span<const uint16_t> cells() const { return cells_; }
  // A sketch from saved counters. InvalidArgument when the size is not
  // kRows * a power-of-two width >= kMinWidth.
  static absl::Status FromCells(std::span<const uint16_t> cells, CountMinSketch* out);

 private:
  size_t Slot(int row, uint64_t id) const;

  size_t width_;
  std::vector<uint16_t> cells_;  // kRows * width_
};

}  // namespace pstrain::server
