// TableTier: one SparseTable's side of a disk tier (--server_memory_budget;
// the tier itself is disk_tier.h, shared by the tables of a server part).
// The table keeps at most RamCapacity() rows in RAM (its RowStore) and the
// rest here:
//   - after each request the rows past the RAM capacity (the least
//     frequently used of a sample, LfuEviction's choice) leave RAM, written
//     to disk when changed since they were read (or new) (Spill);
//   - a request's ids not in RAM are looked up on disk in one batched read
//     (Lookup). A row comes into RAM when a pull or push finds it used
//     kPromoteUses times on disk; until then it is read, and updated, on
//     disk (DiskRow, WriteBack): the many ids used once do not push hot
//     rows out of RAM (TinyLFU's doorkeeper, in effect; measured in
//     bench/results/2026-12-03-tier-admission.md). RocksDB keeps no counts:
//     its rows come into RAM at once;
//   - a restore writes the rows past the RAM capacity straight to disk
//     (InsertRestored, FinishRestore), and checkpoints read them back
//     (ForEachDiskRow).
// A tier that fails (a full disk) fails the request with an error marked
// fatal (IsFatal): the server stops, and its committed checkpoints stay as
// they were.
//
// Rows keep their RowMeta words on disk too (the bytes are the RAM row's).
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "server/ps/tables/disk_tier.h"
#include "server/ps/tables/eviction_policy.h"
#include "server/ps/tables/row_layout.h"
#include "server/ps/tables/row_store.h"

namespace pstrain::server {

// Disk tier counters of a table shard since it was created (not saved).
struct TierCounters {
  uint64_t reads = 0;   // ids not in RAM looked up on disk
  uint64_t hits = 0;    // of them, found there
  uint64_t served = 0;  // of the hits, used from disk without coming into RAM
  uint64_t writes = 0;  // rows written to disk on leaving RAM
  uint64_t drops = 0;   // rows that left RAM unchanged (their disk copy is current)
};

class TableTier {
 public:
  // `tier` (not owned) and `layout` outlive this. `ram_capacity` > 0: the
  // RAM rows; `ram_row_cost` > 0: the RAM a row costs (bytes), and the RAM
  // rows are then ram_capacity less the tier's index of this table (its
  // bytes / this), so that the budget also holds the index as it grows
  // with the rows on disk.
  TableTier(DiskTier* tier, const TableSpec& spec, const RowLayout& layout, size_t ram_capacity,
            size_t ram_row_cost);
  TableTier(const TableTier&) = delete;
  TableTier& operator=(const TableTier&) = delete;

  DiskTier* disk() const { return tier_; }
  const TierCounters& counters() const { return counters_; }
  // Rows on disk, and rows in RAM without a disk copy: the table's rows are
  // their sum.
  size_t disk_rows() const { return disk_rows_; }
  size_t ram_fresh() const { return ram_fresh_; }
  // The table created a row in RAM (no disk copy yet).
  void OnRowCreated() { ++ram_fresh_; }
  // The RAM rows the table keeps now.
  size_t RamCapacity() const;

  // A request's lookups of `ids` (a pull's when `pull`: it counts uses of
  // rows on disk) at table clock `now`: rows[i] = the RAM row of ids[i]
  // (marked used now), or one read from disk into RAM; kNoRow for the
  // others, which are either used on disk (OnDiskOnly) or missing. Returns
  // whether any id was not in RAM. Errors are fatal.
  absl::StatusOr<bool> Lookup(std::span<const uint64_t> ids, uint32_t* rows, bool pull,
                              RowStore& store, uint32_t now);
  // After Lookup: whether ids[pos] is used from disk, and its row there.
  bool OnDiskOnly(size_t pos) const {
    return pos < disk_of_.size() && disk_of_[pos] != RowStore::kNoRow;
  }
  float* DiskRow(size_t pos) {
    return reinterpret_cast<float*>(miss_rows_.data() + size_t{disk_of_[pos]} * row_bytes_);
  }
  // A number for the disk row of ids[pos] in this request (rounding noise).
  uint32_t DiskRowNumber(size_t pos) const { return disk_of_[pos]; }
  // Whether the last Lookup used rows from disk (a push writes them back).
  bool used_disk_rows() const { return !disk_of_.empty(); }
  // Writes the rows a push updated on disk (ids: the push's, as looked up)
  // back to their slots.
  absl::Status WriteBack(std::span<const uint64_t> ids);

  // Moves the rows past RamCapacity() out of RAM at clock `now`.
  absl::Status Spill(RowStore& store, uint32_t now);

  // A restore into a table whose RAM is full: writes the row straight to
  // disk, clean, without passing through RAM (no index churn, no victim
  // search), as updated at `now`. Returns true when a batch of such rows
  // awaits FinishRestore(). REQUIRES: `id` is neither in RAM nor on disk
  // (ids are unique across a checkpoint's files and the table starts empty).
  bool InsertRestored(uint64_t id, std::span<const float> values, std::span<const float> state,
                      uint32_t step, uint32_t now);
  // Commits the rows InsertRestored wrote, then spills RAM rows: the tier's
  // index grew with them, so the budget holds all through the restore.
  absl::Status FinishRestore(RowStore& store, uint32_t now);

  // Calls fn for every row only on disk (a row in RAM is current there),
  // with the row's bytes (valid until the next row). An error only from a
  // tier that cannot be read.
  absl::Status ForEachDiskRow(const RowStore& store,
                              absl::FunctionRef<void(uint64_t id, const float* row)> fn) const;

  // Deletes every row of the table on disk.
  absl::Status Clear();

 private:
  // Reads the rows of ids[miss_pos_[k]] from disk and brings those used
  // enough into RAM.
  absl::Status Promote(std::span<const uint64_t> ids, uint32_t* rows, bool pull, RowStore& store,
                       uint32_t now);
  // Copies the row of `id` read from disk at `src` into a new RAM row.
  absl::StatusOr<uint32_t> PromoteRow(uint64_t id, const char* src, RowStore& store,
                                      uint32_t now);
  absl::Status Commit();

  static constexpr uint16_t kPromoteUses = 2;
  // Uses count half after each RAM capacity of reads from disk.
  static constexpr uint64_t kUseWindowRams = 1;

  DiskTier* const tier_;
  const uint32_t table_id_;
  const std::string name_;
  const RowLayout& layout_;
  const size_t row_bytes_;
  const size_t ram_capacity_;
  const size_t ram_row_cost_;
  // Which RAM rows leave: LFU of a few samples, close to LRU for a cache.
  LfuEviction victims_;
  size_t disk_rows_ = 0;
  size_t ram_fresh_ = 0;
  TierCounters counters_;
  uint16_t use_epoch_ = 0;
  uint64_t window_uses_ = 0;

  // The last Lookup: positions of the misses, their ids, the rows read and
  // whether found (1 + recent uses); per position of the request, its row
  // in miss_rows_ when it is used from disk, else kNoRow.
  std::vector<uint32_t> miss_pos_;
  std::vector<uint64_t> miss_ids_;
  std::vector<char> miss_rows_;
  std::vector<uint8_t> miss_found_;
  std::vector<uint32_t> disk_of_;

  mutable std::vector<float> view_row_;  // ForEachDiskRow: a disk row, aligned
  std::vector<float> restore_row_;       // InsertRestored: a row bound for disk
  size_t restore_puts_ = 0;              // InsertRestored writes not committed
};

}  // namespace pstrain::server
