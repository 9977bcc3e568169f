// EvictionPolicy: which rows a SparseTable drops after a request
// (spec.eviction). The table runs its policies after each push (and after a
// restore), on its owner thread, each with a bounded amount of work, so no
// request waits for a pass over the table. A dropped row is gone: a later
// pull reads zeros and a later push creates it again (through admission).
//
//   LruEviction  with max_rows: drops the row updated longest ago.
//   LfuEviction  with max_rows: drops the row with the fewest pushes, its
//                count halved for every kLfuHalfLifeSteps steps since its
//                last update (rows hot once and no longer used make room in
//                the end: without decay, a table full of them would drop
//                every new row at once, for ever), the oldest among equals.
//   TtlEviction  with ttl_steps: drops rows no push updated for ttl_steps.
// A table with both max_rows and ttl_steps runs its capacity policy (LRU or
// LFU), then the TTL sweep (EvictionPolicy::Create gives them in that
// order).
//
// Capacity: each removal samples kSamples index slots (the entry at or
// after a random slot) and drops the one its policy judges best to lose, as
// Redis's approximated LRU/LFU do: no list or heap to keep in order on every
// access, 8 bytes of metadata per row (RowMeta), and close to exact LRU/LFU
// for tables of any size. Rows are created by pushes only (a pull of a
// missing row reads zeros), so a row pulled for a step is not dropped
// before its push. The disk tier picks the rows that leave RAM with an
// LfuEviction too (table_tier.h).
//
// TTL: a cursor walks the index, a few slots per pushed id, dropping rows
// whose last update is more than ttl_steps behind the clock; one pass over
// the index takes about as many pushes as there are rows, so an expired row
// outlives its ttl by at most about one more ttl on a table that streams
// new ids.
//
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "server/ps/tables/row_store.h"

namespace pstrain::server {

// Eviction counters of a table shard since it was created (not saved).
struct EvictionStats {
  uint64_t capacity = 0;  // rows removed to stay within max_rows
  uint64_t ttl = 0;       // rows removed after ttl_steps without an update
};

class EvictionPolicy {
 public:
  // Row clocks are 32-bit: ages up to 2^31 compare right across a wrap.
  static constexpr uint64_t kMaxTtlSteps = (uint64_t{1} << 31) - 1;

  // The policies of spec.eviction, in the order they run (none when it is
  // off). `capacity`: the rows this shard keeps with max_rows (its part of
  // the table's). InvalidArgument (naming the table) for an unknown policy
  // or ttl_steps above kMaxTtlSteps.
  static absl::StatusOr<std::vector<std::unique_ptr<EvictionPolicy>>> Create(
      const TableSpec& spec, size_t capacity);

  virtual ~EvictionPolicy() = default;

  // Drops the rows of `rows` this policy says must go, after a request at
  // table clock `now`, by calling remove(slot) for each (the table removes
  // the row at that index slot from `rows`, noting it in its change log),
  // and counts them in `stats`. `budget`: index slots a sweep may visit
  // (0: only what a capacity requires).
  virtual void Evict(const RowStore& rows, uint32_t now, size_t budget,
                     absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) = 0;
};

// Drops the least recently updated row of a sample while more than
// `capacity` rows are left.
class LruEviction final : public EvictionPolicy {
 public:
  static constexpr int kSamples = 16;

  // `seed`: of the sampling (deterministic per table).
  LruEviction(size_t capacity, uint64_t seed);

  void Evict(const RowStore& rows, uint32_t now, size_t budget,
             absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) override;
  // The index slot of the row a sample judges best to drop.
  // REQUIRES: rows.size() > 0.
  size_t PickVictim(const RowStore& rows, uint32_t now);

 private:
  const size_t capacity_;
  uint64_t sample_state_;  // xorshift64
};

// Drops the least frequently updated row of a sample (counts decayed by
// age, the oldest among equals) while more than `capacity` rows are left.
class LfuEviction final : public EvictionPolicy {
 public:
  static constexpr int kSamples = 16;
  static constexpr uint32_t kLfuHalfLifeSteps = 1024;

  // `samples` <= kSamples per victim (the disk tier takes fewer: each one a
  // cache miss). `seed`: of the sampling (deterministic per table).
  LfuEviction(size_t capacity, uint64_t seed, int samples = kSamples);

  void Evict(const RowStore& rows, uint32_t now, size_t budget,
             absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) override;
  // The index slot of the row a sample judges best to drop.
  // REQUIRES: rows.size() > 0.
  size_t PickVictim(const RowStore& rows, uint32_t now);
  // A use count after `age` steps without an update.
  static uint32_t DecayedCount(uint32_t count, uint32_t age);

 private:
  const size_t capacity_;
  const int samples_;
  uint64_t sample_state_;  // xorshift64
};

// Drops rows whose last update is more than ttl_steps behind, sweeping the
// index a budget of slots per request.
class TtlEviction final : public EvictionPolicy {
 public:
  // REQUIRES: 0 < ttl_steps <= kMaxTtlSteps.
  explicit TtlEviction(uint64_t ttl_steps);

  void Evict(const RowStore& rows, uint32_t now, size_t budget,
             absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) override;

 private:
  const uint64_t ttl_;
  size_t sweep_pos_ = 0;  // next index slot of the sweep
};

}  // namespace pstrain::server
