// RowArena: fixed-stride rows of floats for a SparseTable's RowStore.
//
// Rows live in 2 MiB chunks backed by huge pages (see PageBuffer); a chunk
// holds R = floor(2 MiB / row bytes) rows, so little more than one row's
// worth of each chunk is unused. A row number is (chunk << shift) | slot
// with 2^shift >= R, so finding a row is a shift and a mask, and row numbers
// have small gaps (at most half the 32-bit space is lost, leaving room for
// over two billion rows).
//
// Released rows (eviction) are reused, last released first, before the
// arena grows; their memory is not returned until Clear().
//
// Growth never copies the table: new rows go to a fresh chunk. The one
// exception is the first chunk, which starts small and doubles (copying at
// most 2 MiB) until it is full size, so that small tables stay small. Row
// pointers are therefore valid only until the next Append().
//
// Not thread-safe: owned by one RowStore, used from its table's owner thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "server/ps/tables/page_buffer.h"

namespace pstrain::server {

class RowArena {
 public:
  // REQUIRES: stride_floats > 0.
  explicit RowArena(size_t stride_floats);
  RowArena(const RowArena&) = delete;
  RowArena& operator=(const RowArena&) = delete;

  // The RAM a row of `stride_floats` takes in a large arena: a full
  // chunk's bytes over the rows it holds (a row's share of the chunk's
  // unused tail included).
  static double BytesPerRow(size_t stride_floats) {
    const size_t row_bytes = stride_floats * sizeof(float);
    return static_cast<double>(ChunkBytes(row_bytes)) / static_cast<double>(RowsPerChunk(row_bytes));
  }

  size_t stride() const { return stride_; }
  size_t size() const { return size_; }
  size_t rows_per_chunk() const { return rows_per_chunk_; }
  // Bytes allocated for rows and the chunk tables.
  size_t bytes() const;

  // REQUIRES: r was returned by Append() since the last Clear().
  float* row(uint32_t r) { return chunks_[r >> shift_] + (r & mask_) * stride_; }
  const float* row(uint32_t r) const { return chunks_[r >> shift_] + (r & mask_) * stride_; }

  // Hints the CPU to load every cache line of row r, for reading or (kWrite)
  // for writing.
  template <bool kWrite = false>
  void Prefetch(uint32_t r) const {
    const char* p = reinterpret_cast<const char*>(row(r));
    for (size_t off = 0; off < row_bytes_; off += 64) __builtin_prefetch(p + off, kWrite);
    __builtin_prefetch(p + row_bytes_ - 1, kWrite);
  }

  // True when no row number below 2^32 - 1 is left for another row.
  bool full() const;

  // Adds an uninitialized row and returns its number: a released one when
  // there is one. REQUIRES: !full().
  uint32_t Append();

  // Gives row r back for reuse by a later Append(). REQUIRES: r is live.
  void Release(uint32_t r) {
    free_.push_back(r);
    --size_;
  }

  // Frees every row.
  void Clear();

  size_t free_rows() const { return free_.size(); }
  // Compaction, for a table whose RAM capacity went down (its disk tier's
  // index grew): gives back the last chunks whose live rows fit in the
  // released rows below them. PlanShrink copies those rows down and says
  // how many chunks it will free (0: none); the caller then maps every row
  // number it holds through Moved(), and FinishShrink frees the chunks.
  size_t PlanShrink();
  uint32_t Moved(uint32_t r) const {
    return (r >> shift_) >= shrink_first_ ? moved_[r - (shrink_first_ << shift_)] : r;
  }
  void FinishShrink();

 private:
  static constexpr size_t kFirstChunkRows = 64;

  // R, and the bytes of a full chunk (a multiple of 2 MiB), for rows of
  // `row_bytes`.
  static size_t RowsPerChunk(size_t row_bytes) {
    return std::max<size_t>(1, PageBuffer::kHugePage / row_bytes);
  }
  static size_t ChunkBytes(size_t row_bytes) {
    return (RowsPerChunk(row_bytes) * row_bytes + PageBuffer::kHugePage - 1) /
           PageBuffer::kHugePage * PageBuffer::kHugePage;
  }

  // Rows the last chunk can hold.
  size_t LastCapacity() const {
    return buffers_.size() == 1 ? first_capacity_ : rows_per_chunk_;
  }
  // Number the next Append would return, as 64 bits.
  uint64_t NextNumber() const;
  void AddChunk(size_t capacity);

  const size_t stride_;
  const size_t row_bytes_;
  size_t rows_per_chunk_ = 0;  // R
  size_t chunk_bytes_ = 0;     // bytes of a full chunk (multiple of 2 MiB)
  size_t shift_ = 0;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t last_fill_ = 0;       // rows used in the last chunk
  size_t first_capacity_ = 0;  // rows the first chunk holds now (<= R)
  std::vector<PageBuffer> buffers_;
  std::vector<float*> chunks_;  // buffers_[i].data(), for the fast path
  std::vector<uint32_t> free_;  // released row numbers
  // PlanShrink .. FinishShrink: the first chunk to free, and where each row
  // number of the chunks from there on moved to.
  size_t shrink_first_ = SIZE_MAX;
  std::vector<uint32_t> moved_;
};

}  // namespace pstrain::server
