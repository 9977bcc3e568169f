// RowIndex: the id -> row-number map of a SparseTable's RowStore.
//
// Open addressing with linear probing over one array of packed 12-byte slots
// (8-byte id, 4-byte row number), so a probe usually touches one cache line.
// A slot is empty when its row number is kNoRow, so every 64-bit id,
// including 0 and ~0, is a valid key. The load factor stays at or below 0.8;
// the array grows by half when it would pass that, which keeps the index at
// 12 / 0.53 = 22.5 bytes per id or less. Large
// arrays are backed by huge pages (PageBuffer). Removing an id (eviction)
// shifts the later entries of its probe run back into the hole (no
// tombstones), so lookups stay as short as before; the array never shrinks
// but Clear() frees it.
//
// Not thread-safe: owned by one RowStore, used from its table's owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include "common/hash.h"
#include "server/ps/tables/page_buffer.h"

namespace pstrain::server {

class RowIndex {
 public:
  static constexpr uint32_t kNoRow = 0xffffffffu;

  RowIndex();
  RowIndex(const RowIndex&) = delete;
  RowIndex& operator=(const RowIndex&) = delete;

  // The most bytes an id costs in a large index: 12-byte slots at the
  // lowest load a growth leaves, 0.8 / 1.5 (15 bytes at the highest, 0.8).
  // While the array grows, the old one (its ids x 15 bytes) lives as well.
  static constexpr double kMaxBytesPerId = 12.0 / (0.8 / 1.5);

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return slots_buffer_.bytes(); }

  // Row number of `id`, or kNoRow.
  uint32_t Find(uint64_t id) const {
    for (size_t pos = Home(id);; pos = Next(pos)) {
      uint32_t row = RowAt(pos);
      if (row == kNoRow) return kNoRow;
      if (KeyAt(pos) == id) return row;
    }
  }

  // Maps `id` to `row`. REQUIRES: id is absent; row != kNoRow.
  void Insert(uint64_t id, uint32_t row);

  // Hints the CPU to load the slot where a lookup of `id` starts.
  void Prefetch(uint64_t id) const { __builtin_prefetch(slots_ + Home(id) * kSlotBytes); }
  // Prefetches slot `pos` (0 <= pos < capacity()).
  void PrefetchSlot(size_t pos) const { __builtin_prefetch(slots_ + pos * kSlotBytes); }

  // Removes `id` and returns its row number; kNoRow when absent.
  uint32_t Erase(uint64_t id);

  // The slot after `pos`, wrapping at the end.
  size_t Next(size_t pos) const { return pos + 1 == capacity_ ? 0 : pos + 1; }

  // Slot-level access, for sampling and sweeps over the entries: the row
  // number at slot `pos` < capacity() (kNoRow: empty) and its id.
  uint32_t SlotRow(size_t pos, uint64_t* id) const {
    *id = KeyAt(pos);
    return RowAt(pos);
  }
  // Removes the entry at occupied slot `pos`. A later entry of its probe
  // run may move into `pos` (so a sweep looks at `pos` again); an entry
  // never moves to a slot after its old one, except across the end.
  void EraseSlot(size_t pos);

  // Bytes of the larger array that `more` further inserts would make the
  // index grow into (both arrays are alive while it grows); 0 if none.
  size_t GrowthBytes(size_t more) const {
    return size_ + more > max_size_ ? Grown(capacity_) * kSlotBytes : 0;
  }
  // Grows the array so that `n` ids fit without a further resize.
  void Reserve(size_t n);

  // Removes every id and returns to the initial capacity.
  void Clear();

  // Replaces each entry's row number r by fn(r).
  template <typename Fn>
  void MapRows(Fn&& fn) {
    for (size_t pos = 0; pos < capacity_; ++pos) {
      const uint32_t row = RowAt(pos);
      if (row != kNoRow) Store(pos, KeyAt(pos), fn(row));
    }
  }
  // Calls fn(id, row) for every entry, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t pos = 0; pos < capacity_; ++pos) {
      uint32_t row = RowAt(pos);
      if (row != kNoRow) fn(KeyAt(pos), row);
    }
  }

 private:
  static constexpr size_t kSlotBytes = 12;
  static_assert(kSlotBytes == 12, "kMaxBytesPerId assumes 12-byte slots");
  static constexpr size_t kInitialCapacity = 16;

  // The slot a lookup starts at: the hash scaled to [0, capacity) by a
  // multiply (Lemire's range reduction), as the capacity is not a power
  // of two.
  // The hash is seeded by the capacity: an index filled in another one's
  // slot order (a restore of a saved table, whose rows come in the order of
  // their old homes) would otherwise pile them into one run at the front of
  // a smaller array, and each insert would probe it all (quadratic).
  size_t Home(uint64_t id) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(Mix64(id ^ seed_)) * capacity_) >>
                               64);
  }
  uint64_t KeyAt(size_t pos) const {
    uint64_t key;
    std::memcpy(&key, slots_ + pos * kSlotBytes, sizeof(key));
    return key;
  }
  uint32_t RowAt(size_t pos) const {
    uint32_t row;
    std::memcpy(&row, slots_ + pos * kSlotBytes + 8, sizeof(row));
    return row;
  }
  void Store(size_t pos, uint64_t id, uint32_t row) {
    std::memcpy(slots_ + pos * kSlotBytes, &id, sizeof(id));
    std::memcpy(slots_ + pos * kSlotBytes + 8, &row, sizeof(row));
  }
  // Largest size that `capacity` slots hold (load factor 0.8).
  static size_t MaxSizeFor(size_t capacity) { return capacity / 5 * 4; }
  // The next capacity: 1.5 times (not 2: the load stays in [0.53, 0.8],
  // 15 to 22.5 bytes per id, instead of [0.4, 0.8]).
  static size_t Grown(size_t capacity) { return capacity + capacity / 2; }
  void Rehash(size_t new_capacity);

  PageBuffer slots_buffer_;  // huge pages once the index passes 2 MiB
  uint8_t* slots_ = nullptr;  // slots_buffer_.data()
  size_t capacity_ = 0;
  uint64_t seed_ = 0;  // Mix64(capacity_)
  size_t size_ = 0;
  size_t max_size_ = 0;
};

}  // namespace pstrain::server
