#include "server/ps/tables/row_arena.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pstrain::server {
namespace {
constexpr uint64_t kNoNumber = 0xffffffffu;  // RowIndex::kNoRow
}  // namespace

RowArena::RowArena(size_t stride_floats)
    : stride_(stride_floats), row_bytes_(stride_floats * sizeof(float)) {
  rows_per_chunk_ = RowsPerChunk(row_bytes_);
  chunk_bytes_ = ChunkBytes(row_bytes_);
  while ((size_t{1} << shift_) < rows_per_chunk_) ++shift_;
  mask_ = (size_t{1} << shift_) - 1;
}

size_t RowArena::bytes() const {
  size_t total = buffers_.capacity() * sizeof(PageBuffer) + chunks_.capacity() * sizeof(float*) +
                 free_.capacity() * sizeof(uint32_t);
  for (const PageBuffer& b : buffers_) total += b.bytes();
  return total;
}

uint64_t RowArena::NextNumber() const {
  if (buffers_.empty()) return 0;
  if (last_fill_ < LastCapacity() || first_capacity_ < rows_per_chunk_) {
    return (uint64_t{buffers_.size() - 1} << shift_) | last_fill_;
  }
  return uint64_t{buffers_.size()} << shift_;
}

bool RowArena::full() const { return free_.empty() && NextNumber() >= kNoNumber; }

void RowArena::AddChunk(size_t capacity) {
  buffers_.emplace_back(capacity == rows_per_chunk_ ? chunk_bytes_ : capacity * row_bytes_);
  chunks_.push_back(static_cast<float*>(buffers_.back().data()));
  last_fill_ = 0;
}

uint32_t RowArena::Append() {
  if (!free_.empty()) {
    const uint32_t r = free_.back();
    free_.pop_back();
    ++size_;
    return r;
  }
  if (buffers_.empty()) {
    first_capacity_ = std::min(kFirstChunkRows, rows_per_chunk_);
    AddChunk(first_capacity_);
  } else if (last_fill_ == LastCapacity()) {
    if (buffers_.size() == 1 && first_capacity_ < rows_per_chunk_) {
      // Grow the first chunk in place of adding one: copy its rows over.
      first_capacity_ = std::min(2 * first_capacity_, rows_per_chunk_);
      PageBuffer grown(first_capacity_ == rows_per_chunk_ ? chunk_bytes_
                                                          : first_capacity_ * row_bytes_);
      std::memcpy(grown.data(), buffers_[0].data(), last_fill_ * row_bytes_);
      buffers_[0] = std::move(grown);
      chunks_[0] = static_cast<float*>(buffers_[0].data());
    } else {
      AddChunk(rows_per_chunk_);
    }
  }
  const uint64_t number = (uint64_t{buffers_.size() - 1} << shift_) | last_fill_;
  ++last_fill_;
  ++size_;
  return static_cast<uint32_t>(number);
}

size_t RowArena::PlanShrink() {
  const size_t chunks = buffers_.size();
  if (chunks <= 1 || free_.size() < rows_per_chunk_) return 0;
  // Rows used in chunk c: all of a full chunk, last_fill_ of the last.
  auto used = [&](size_t c) { return c + 1 == chunks ? last_fill_ : rows_per_chunk_; };
  std::vector<size_t> free_in(chunks, 0);
  for (uint32_t r : free_) ++free_in[r >> shift_];
  // The most chunks from the end whose live rows fit in the free rows below.
  size_t k = 0, live_top = 0, free_below = free_.size();
  while (k + 1 < chunks) {
    const size_t c = chunks - 1 - k;
    const size_t live = used(c) - free_in[c];
    if (live_top + live > free_below - free_in[c]) break;
    live_top += live;
    free_below -= free_in[c];
    ++k;
  }
  if (k == 0) return 0;
  const size_t first = chunks - k;
  std::vector<uint32_t> below;
  std::vector<uint8_t> is_free(k << shift_, 0);
  below.reserve(free_below);
  for (uint32_t r : free_) {
    if ((r >> shift_) < first) {
      below.push_back(r);
    } else {
      is_free[r - (first << shift_)] = 1;
    }
  }
  moved_.assign(k << shift_, static_cast<uint32_t>(kNoNumber));
  for (size_t c = first; c < chunks; ++c) {
    for (size_t s = 0; s < used(c); ++s) {
      const size_t at = ((c - first) << shift_) | s;
      if (is_free[at]) continue;
      const uint32_t to = below.back();
      below.pop_back();
      std::memcpy(row(to), chunks_[c] + s * stride_, row_bytes_);
      moved_[at] = to;
    }
  }
  free_ = std::move(below);
  shrink_first_ = first;
  return k;
}

void RowArena::FinishShrink() {
  if (shrink_first_ == SIZE_MAX) return;
  buffers_.resize(shrink_first_);
  chunks_.resize(shrink_first_);
  last_fill_ = LastCapacity();  // every row of the new last chunk is live or free
  shrink_first_ = SIZE_MAX;
  moved_.clear();
  moved_.shrink_to_fit();
}

void RowArena::Clear() {
  buffers_.clear();
  buffers_.shrink_to_fit();
  chunks_.clear();
  chunks_.shrink_to_fit();
  free_.clear();
  free_.shrink_to_fit();
  size_ = 0;
  last_fill_ = 0;
  first_capacity_ = 0;
}

}  // namespace pstrain::server
