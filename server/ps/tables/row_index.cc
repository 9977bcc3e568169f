#include "server/ps/tables/row_index.h"

#include <utility>

namespace pstrain::server {

RowIndex::RowIndex() { Rehash(kInitialCapacity); }

void RowIndex::Insert(uint64_t id, uint32_t row) {
  if (size_ + 1 > max_size_) Rehash(Grown(capacity()));
  size_t pos = Home(id);
  while (RowAt(pos) != kNoRow) pos = Next(pos);
  Store(pos, id, row);
  ++size_;
}

uint32_t RowIndex::Erase(uint64_t id) {
  for (size_t pos = Home(id);; pos = Next(pos)) {
    uint32_t row = RowAt(pos);
    if (row == kNoRow) return kNoRow;
    if (KeyAt(pos) == id) {
      EraseSlot(pos);
      return row;
    }
  }
}

void RowIndex::EraseSlot(size_t pos) {
  // Backward-shift deletion: walk the run after the hole; an entry whose
  // home is not cyclically in (hole, j] may fill the hole (its probe from
  // home still reaches it), which moves the hole to j.
  size_t hole = pos;
  for (size_t j = Next(pos);; j = Next(j)) {
    const uint32_t row = RowAt(j);
    if (row == kNoRow) break;
    const uint64_t key = KeyAt(j);
    const size_t home = Home(key);
    const bool movable = j > hole ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      Store(hole, key, row);
      hole = j;
    }
  }
  Store(hole, ~uint64_t{0}, kNoRow);
  --size_;
}

void RowIndex::Reserve(size_t n) {
  size_t cap = capacity();
  while (MaxSizeFor(cap) < n) cap = Grown(cap);
  if (cap != capacity()) Rehash(cap);
}

void RowIndex::Clear() {
  size_ = 0;
  slots_buffer_ = PageBuffer();
  slots_ = nullptr;
  Rehash(kInitialCapacity);
}

void RowIndex::Rehash(size_t new_capacity) {
  // All-ones bytes: every row number is kNoRow, i.e. every slot is empty.
  PageBuffer fresh(new_capacity * kSlotBytes);
  std::memset(fresh.data(), 0xff, new_capacity * kSlotBytes);
  PageBuffer old_buffer = std::exchange(slots_buffer_, std::move(fresh));
  const uint8_t* old = static_cast<const uint8_t*>(old_buffer.data());
  const size_t old_capacity = old != nullptr ? capacity_ : 0;
  slots_ = static_cast<uint8_t*>(slots_buffer_.data());
  capacity_ = new_capacity;
  seed_ = Mix64(new_capacity);
  max_size_ = MaxSizeFor(new_capacity);
  for (size_t i = 0; i < old_capacity; ++i) {
    uint64_t key;
    uint32_t row;
    std::memcpy(&key, old + i * kSlotBytes, sizeof(key));
    std::memcpy(&row, old + i * kSlotBytes + 8, sizeof(row));
    if (row == kNoRow) continue;
    size_t pos = Home(key);
    while (RowAt(pos) != kNoRow) pos = Next(pos);
    Store(pos, key, row);
  }
}

}  // namespace pstrain::server
