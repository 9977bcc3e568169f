// IdDeduper: an open-addressing (linear probing) hash map from 64-bit feature
// id to its first-seen position, built for Model::Plan(): one pass per sparse
// table per batch. Cleared in O(1) by bumping an epoch, and grow-only, so it
// allocates nothing once it has seen the largest batch. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/hash.h"

namespace pstrain::worker {

class IdDeduper {
 public:
  IdDeduper() = default;
  IdDeduper(const IdDeduper&) = delete;
  IdDeduper& operator=(const IdDeduper&) = delete;

  // Starts an empty set sized for up to `max_ids` distinct ids (load <= 1/2).
  void Reset(size_t max_ids);

  // The position of `id` among the distinct ids since Reset(); a new id gets
  // position unique->size() and is appended to `unique`.
  // REQUIRES: at most `max_ids` distinct ids since Reset().
  uint32_t FindOrInsert(uint64_t id, std::vector<uint64_t>* unique) {
    size_t slot = static_cast<size_t>(Mix64(id)) & mask_;
    while (true) {
      Slot& s = slots_[slot];
      if (s.epoch != epoch_) {
        const uint32_t pos = static_cast<uint32_t>(unique->size());
        s = Slot{id, pos, epoch_};
        unique->push_back(id);
        return pos;
      }
      if (s.key == id) return s.pos;
      slot = (slot + 1) & mask_;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    uint32_t pos;
    uint32_t epoch;  // the slot is live only when epoch == epoch_
  };

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t epoch_ = 0;
};

}  // namespace pstrain::worker
