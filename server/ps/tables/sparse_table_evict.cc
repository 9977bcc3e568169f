// SparseTable's eviction: the capacity limit (max_rows, LRU or LFU) and the
// ttl sweep. Both run after a request on the table's owner thread, each
// with a bounded amount of work, so no request waits for a pass over the
// table.
//
// Capacity: each removal samples kEvictionSamples index slots (the entry at
// or after a random slot) and drops the one its policy judges best to lose,
// as Redis's approximated LRU/LFU do: no list or heap to keep in order on
// every access, 8 bytes of metadata per row, and close to exact LRU/LFU for
// tables of any size. LRU drops the row updated longest ago. LFU drops the
// row with the fewest pushes, its count halved for every kLfuHalfLifeSteps
// steps since its last update (so rows that were hot once and are no longer
// used make room in the end: without decay, a table full of them would
// drop every new row at once, for ever), the oldest among equals. Rows are
// created by pushes only (a pull of a missing row reads the initializer's
// value), so a row pulled for a step is not dropped before its push.
//
// TTL: a cursor walks the index, a few slots per pushed id, dropping rows
// whose last update is more than ttl_steps behind the clock; one pass over
// the index takes about as many pushes as there are rows, so an expired row
// outlives its ttl by at most about one more ttl on a table that streams
// new ids.
#include "server/ps/tables/sparse_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

constexpr int kEvictionSamples = 16;
// For the disk tier, where each request's misses each push a row out of RAM:
// fewer samples (each one a cache miss), close to LRU for a cache.
constexpr int kTierSamples = 8;
constexpr uint32_t kLfuHalfLifeSteps = 1024;

// LFU's count after decay.
uint32_t DecayedCount(uint32_t count, uint32_t age) {
  const uint32_t halvings = age / kLfuHalfLifeSteps;
  return halvings >= 32 ? 0 : count >> halvings;
}

}  // namespace

size_t SparseTable::SampleVictim() {
  const size_t capacity = index_.capacity();
  const uint32_t now = static_cast<uint32_t>(clock_);
  const bool lfu = tier_ != nullptr || spec_.eviction.policy == EvictPolicy::kLfu;
  const int samples = tier_ ? kTierSamples : kEvictionSamples;
  // The samples' index slots, then their rows' metadata, are fetched
  // together: a handful of cache misses in parallel, not one after another.
  size_t pos[kEvictionSamples];
  uint32_t rows[kEvictionSamples];
  for (int k = 0; k < samples; ++k) {
    // xorshift64: cheap, deterministic per table.
    sample_state_ ^= sample_state_ << 13;
    sample_state_ ^= sample_state_ >> 7;
    sample_state_ ^= sample_state_ << 17;
    pos[k] = static_cast<size_t>(sample_state_ % capacity);
    index_.PrefetchSlot(pos[k]);
  }
  for (int k = 0; k < samples; ++k) {
    uint64_t id;
    while ((rows[k] = index_.SlotRow(pos[k], &id)) == RowIndex::kNoRow) pos[k] = index_.Next(pos[k]);
    __builtin_prefetch(Meta(rows[k]));
  }
  size_t best = 0;
  uint64_t best_key = 0;
  for (int k = 0; k < samples; ++k) {
    const uint32_t* m = Meta(rows[k]);
    const uint32_t age = now - m[0];
    // Larger is a better victim.
    const uint64_t key =
        lfu ? (uint64_t{UINT32_MAX - DecayedCount(m[1] & kCountMask, age)} << 32) | age
            : uint64_t{age};
    if (k == 0 || key > best_key) {
      best = pos[k];
      best_key = key;
    }
  }
  return best;
}

void SparseTable::RemoveAt(size_t slot, bool to_disk) {
  uint64_t id;
  const uint32_t r = index_.SlotRow(slot, &id);
  if (!to_disk) changes_.Removed(id);
  index_.EraseSlot(slot);
  arena_.Release(r);
}

size_t SparseTable::RamCapacity() const {
  if (options_.ram_row_cost == 0) return evict_capacity_;
  constexpr size_t kMinRows = 1024;
  const size_t less = tier_->index_bytes(spec_.id) / options_.ram_row_cost;
  return std::max(kMinRows, evict_capacity_ > less ? evict_capacity_ - less : 0);
}

absl::Status SparseTable::EvictToCapacity() {
  if (evict_capacity_ == 0) return absl::OkStatus();
  if (tier_ == nullptr) {
    while (arena_.size() > evict_capacity_) {
      RemoveAt(SampleVictim());
      ++eviction_stats_.capacity;
    }
    return absl::OkStatus();
  }
  const size_t capacity = RamCapacity();
  // To the disk tier: a row goes to disk when it has no copy there or
  // changed since; the batch is written once, after the loop.
  const size_t bytes = row_bytes();
  while (arena_.size() > capacity) {
    const size_t slot = SampleVictim();
    uint64_t id;
    const uint32_t r = index_.SlotRow(slot, &id);
    uint32_t* m = Meta(r);
    if ((m[1] & kOnDisk) == 0 || (m[1] & kDirty) != 0) {
      if ((m[1] & kOnDisk) == 0) {
        ++disk_rows_;
        --ram_fresh_;
      }
      m[1] = (m[1] & kCountMask) | kOnDisk;
      tier_->Put(spec_.id, id, arena_.row(r), bytes);
      ++tier_counters_.writes;
    } else {
      ++tier_counters_.drops;
    }
    RemoveAt(slot, /*to_disk=*/true);
  }
  // The capacity falls as the tier's index grows: the RAM of the rows that
  // left goes back too, a few chunks at a time (a pass over the index).
  if (arena_.free_rows() >= 2 * arena_.rows_per_chunk() && arena_.PlanShrink() > 0) {
    index_.MapRows([&](uint32_t r) { return arena_.Moved(r); });
    arena_.FinishShrink();
  }
  return MarkFatal(Annotate(tier_->Commit(), absl::StrCat("sparse table '", spec_.name, "'")));
}

void SparseTable::SweepExpired(size_t budget) {
  const uint64_t ttl = spec_.eviction.ttl_steps;
  if (ttl == 0) return;
  if (sweep_pos_ >= index_.capacity()) sweep_pos_ = 0;  // the index was cleared
  const uint32_t now = static_cast<uint32_t>(clock_);
  for (size_t n = 0; n < budget && index_.size() > 0; ++n) {
    uint64_t id;
    const uint32_t r = index_.SlotRow(sweep_pos_, &id);
    if (r != RowIndex::kNoRow && now - Meta(r)[0] > ttl) {
      RemoveAt(sweep_pos_);  // a later entry may move here: look again
      ++eviction_stats_.ttl;
      continue;
    }
    sweep_pos_ = index_.Next(sweep_pos_);
  }
}

absl::Status SparseTable::AfterRequest(size_t budget) {
  absl::Status st = EvictToCapacity();
  SweepExpired(budget);
  return st;
}

}  // namespace pstrain::server
