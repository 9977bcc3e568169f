// RowStore: the rows of a SparseTable shard that are in RAM, by id: the
// id -> row number index (RowIndex, open addressing) over fixed-stride rows
// in an arena of 2 MiB huge-page chunks (RowArena; growth adds chunks, it
// never copies the table). Beyond its floats (RowLayout) a row costs its
// index slot (15 to 22.5 bytes) and a sliver of the last chunk.
//
// It knows nothing of what the floats mean beyond the two metadata words
// that eviction and the disk tier keep per row (RowMeta below): the table
// fills new rows, the admission filter decides which ids get one, eviction
// policies and the disk tier choose which leave. Eviction reaches rows by
// index slot (SlotRow, NextSlot), so that samples and sweeps need no list
// kept in order on every access.
//
// Row pointers are valid until the next Add(), Compact() or Clear().
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "server/ps/tables/row_arena.h"
#include "server/ps/tables/row_index.h"
#include "server/ps/tables/row_layout.h"

namespace pstrain::server {

// The metadata words of a row with eviction or a disk tier:
//   word 0: the table clock of its last use (a push; with a tier any use);
//   word 1: its use count (low 30 bits, saturating) and, with a disk tier,
//           whether it has a copy on disk and whether it changed since (a
//           dirty row is written back when it leaves RAM).
struct RowMeta {
  static constexpr uint32_t kCountMask = (1u << 30) - 1;
  static constexpr uint32_t kOnDisk = 1u << 30;
  static constexpr uint32_t kDirty = 1u << 31;

  static uint32_t Count(const uint32_t* m) { return m[1] & kCountMask; }
  // Used at `now` (the tier's reads): for LRU the clock, for LFU one more use.
  static void Use(uint32_t* m, uint32_t now) {
    m[0] = now;
    if ((m[1] & kCountMask) != kCountMask) ++m[1];
  }
  // Updated at `now` by a push: used, and changed since its disk copy.
  static void Touch(uint32_t* m, uint32_t now) {
    m[0] = now;
    uint32_t count = m[1] & kCountMask;
    if (count != kCountMask) ++count;
    m[1] = count | kDirty | (m[1] & kOnDisk);
  }
};

class RowStore {
 public:
  static constexpr uint32_t kNoRow = RowIndex::kNoRow;

  explicit RowStore(const RowLayout& layout);
  RowStore(const RowStore&) = delete;
  RowStore& operator=(const RowStore&) = delete;

  size_t size() const { return arena_.size(); }
  // True when no row number is left for another row (Add() would fail).
  bool full() const { return arena_.full(); }

  // The row number of `id`, or kNoRow.
  uint32_t Find(uint64_t id) const { return index_.Find(id); }
  // Hints the CPU to load the index slot where Find(id) starts.
  void Prefetch(uint64_t id) const { index_.Prefetch(id); }
  // Hints the CPU to load row r, for reading or (kWrite) writing.
  template <bool kWrite = false>
  void PrefetchRow(uint32_t r) const {
    arena_.Prefetch<kWrite>(r);
  }

  // Adds an uninitialized row for `id` and returns its number.
  // REQUIRES: Find(id) == kNoRow, !full().
  uint32_t Add(uint64_t id) {
    const uint32_t r = arena_.Append();
    index_.Insert(id, r);
    return r;
  }
  float* row(uint32_t r) { return arena_.row(r); }
  const float* row(uint32_t r) const { return arena_.row(r); }
  // The metadata words of row r (RowMeta). REQUIRES: the layout has them.
  uint32_t* meta(uint32_t r) { return reinterpret_cast<uint32_t*>(arena_.row(r) + meta_offset_); }
  const uint32_t* meta(uint32_t r) const {
    return reinterpret_cast<const uint32_t*>(arena_.row(r) + meta_offset_);
  }

  // Slot-level access to the index, for eviction's samples and sweeps:
  // slots() slots, the row number at `slot` (kNoRow: empty) and its id.
  size_t slots() const { return index_.capacity(); }
  uint32_t SlotRow(size_t slot, uint64_t* id) const { return index_.SlotRow(slot, id); }
  size_t NextSlot(size_t slot) const { return index_.Next(slot); }
  void PrefetchSlot(size_t slot) const { index_.PrefetchSlot(slot); }
  // Removes the row at occupied index slot `slot` and returns its id; a
  // later entry may move into `slot` (RowIndex::EraseSlot).
  uint64_t RemoveAt(size_t slot);

  // Calls fn(id, row number) for every row, in index slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    index_.ForEach(fn);
  }

  // Pre-sizes the index for `rows` rows.
  void Reserve(size_t rows) { index_.Reserve(rows); }
  // Removes every row and frees its memory.
  void Clear();
  // Gives back the RAM of removed rows when two chunks' worth or more are
  // free, a few chunks at a time (a pass over the index). Row numbers move.
  void Compact();

  size_t arena_bytes() const { return arena_.bytes(); }
  size_t index_bytes() const { return index_.bytes(); }

 private:
  const size_t meta_offset_;
  RowIndex index_;
  RowArena arena_;
};

}  // namespace pstrain::server
