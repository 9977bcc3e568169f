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
  rows_per_chunk_ = std::max<size_t>(1, PageBuffer::kHugePage / row_bytes_);
  chunk_bytes_ = (rows_per_chunk_ * row_bytes_ + PageBuffer::kHugePage - 1) /
                 PageBuffer::kHugePage * PageBuffer::kHugePage;
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
