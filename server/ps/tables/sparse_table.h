// SparseTable: one server's shard of a sparse parameter table, mapping a
// 64-bit feature id to a row of `dim` floats plus its optimizer state.
//
// A row store with a policy in front and policies behind:
//
//   push ids ──> AdmissionFilter ──> RowStore ──> EvictionPolicy (LRU, LFU, TTL)
//                (admission_filter.h) (row_store.h) (eviction_policy.h)
//                                        │
//                                    TableTier ──> DiskTier (rows past the RAM budget)
//                                    (table_tier.h)
//
// The table itself does what is left: pulls and pushes (the optimizer),
// rows' first values, restores and checkpoint views. The pieces:
//   - RowStore: the rows in RAM by id (an open-addressing index over an
//     arena of huge-page chunks); RowLayout says where a row's values,
//     optimizer state, step count and eviction metadata lie, and converts
//     fp16/bf16 values (spec.dtype) on each pull and push.
//   - AdmissionFilter (spec.admission): which new ids a push gives a row
//     (a count-min sketch's min_count, or a coin of admit_probability);
//     AdmitAll without admission.
//   - EvictionPolicy (spec.eviction): after each push the rows past the
//     shard's capacity (LRU or LFU of a sample), then those not updated for
//     ttl_steps (TTL), are removed: a bounded amount of work per push on the
//     owner thread, no pause.
//   - TableTier (Options::tier, --server_memory_budget): at most
//     Options::ram_capacity rows stay in RAM and the rest go to a disk tier;
//     a request for an id not in RAM reads it from disk in one batched read.
//     size() then counts the rows in RAM and on disk, and ForEachRow visits
//     both (a consistent view: every call comes from the owner thread).
//   - GradientMerger: a push's duplicate ids, their gradients summed.
//   - PullMemo: the row numbers of recent pulls, reused by their pushes.
//
// Rows are created on first pull or push with the table's deterministic
// initializer (common/optim/initializer.h), so a row's first value does not
// depend on which server holds it. With admission, eviction, a tier or
// spec.zero_untrained rows are created by pushes only: a pull of an id
// without a row reads zeros, storing nothing, and the gradients of an id
// that admission refuses are dropped and counted.
//
// Not thread-safe: a table shard has one owner thread (the server's shard
// thread) and all calls, const ones included, come from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/optim/initializer.h"
#include "common/optim/optimizer.h"
#include "common/table_spec.h"
#include "server/ps/tables/admission_filter.h"
#include "server/ps/tables/change_log.h"
#include "server/ps/tables/count_min_sketch.h"
#include "server/ps/tables/disk_tier.h"
#include "server/ps/tables/eviction_policy.h"
#include "server/ps/tables/gradient_merger.h"
#include "server/ps/tables/pull_memo.h"
#include "server/ps/tables/row_layout.h"
#include "server/ps/tables/row_store.h"
#include "server/ps/tables/table_tier.h"

namespace pstrain::server {

struct MemoryStats {
  size_t rows = 0;
  size_t value_bytes = 0;  // rows * dim floats
  size_t state_bytes = 0;  // rows * (optimizer state + Adam's step count)
  size_t total_bytes = 0;  // everything the table holds: rows, index, scratch
  size_t index_bytes = 0;    // the id -> row map
  size_t scratch_bytes = 0;  // per-request working buffers (sized by requests, not rows)
  size_t sketch_bytes = 0;   // the admission sketch (fixed; 0 without admission)
  // With a disk tier: rows in RAM (the others are on disk; `rows` counts
  // both, the byte counts above are RAM's).
  size_t ram_rows = 0;
  size_t disk_rows = 0;
};

// Admission counters of a table shard since it was created (not saved).
struct AdmissionStats {
  uint64_t admitted = 0;       // rows created by an admitting push
  uint64_t refused_ids = 0;    // ids of pushes whose gradients were dropped
  uint64_t refused_pushes = 0; // pushes that dropped at least one id's gradients
};

// One row as seen by SparseTable::ForEachRow. The spans point into the table
// (fp16/bf16 values: into a buffer of the table) and stay valid until the
// next row or call.
struct SparseRow {
  uint64_t id = 0;
  std::span<const float> values;  // dim floats
  std::span<const float> state;   // SparseTable::state_floats() floats
  uint32_t step = 0;              // updates applied to the row (Adam; else 0)
};

class SparseTable {
 public:
  // Row numbers are 32-bit (RowIndex::kNoRow reserved) with small gaps
  // (RowArena), so a shard holds over 2^31 rows; no option allows more.
  static constexpr size_t kMaxRows = RowIndex::kNoRow - 1;
  static constexpr uint32_t kMaxDim = 1 << 16;
  static constexpr uint64_t kMaxTtlSteps = EvictionPolicy::kMaxTtlSteps;

  struct Options {
    // Pulls and pushes that would create more rows fail with
    // ResourceExhausted (a memory cap; also lets tests reach the limit).
    size_t max_rows = kMaxRows;
    // With spec.eviction.max_rows: the rows this shard keeps after each
    // request (its part of the table's max_rows; KvStore divides it).
    // 0: spec.eviction.max_rows itself.
    size_t evict_capacity = 0;
    // A disk tier for the rows past ram_capacity (> 0); not owned, outlives
    // the table. Not with spec.eviction (InvalidArgument).
    DiskTier* tier = nullptr;
    size_t ram_capacity = 0;
    // > 0: the RAM a row costs (bytes); the RAM rows are then ram_capacity
    // less the tier's index of this table (its bytes / this), so that the
    // budget also holds the index as it grows with the rows on disk.
    size_t ram_row_cost = 0;
  };

  // InvalidArgument when `spec` is not a sparse table with 0 < dim <= kMaxDim
  // and valid optimizer, initializer, admission and eviction configs.
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const TableSpec& spec,
                                                             Options options);
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const TableSpec& spec) {
    return Create(spec, Options());
  }

  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;

  const TableSpec& spec() const { return spec_; }
  size_t dim() const { return layout_.dim(); }
  // Optimizer state floats per row (Adam's step count not included).
  size_t state_floats() const { return layout_.state_floats(); }
  // Rows of the shard (with a disk tier: in RAM and on disk).
  size_t size() const { return tier_ ? tier_->disk_rows() + tier_->ram_fresh() : store_.size(); }
  size_t ram_rows() const { return store_.size(); }
  // Bytes a row takes in RAM (values, state, metadata; not the index).
  size_t row_bytes() const { return layout_.row_bytes(); }

  // out[i * dim, (i + 1) * dim) = row ids[i], creating missing rows.
  // Duplicates are allowed. REQUIRES: out holds ids.size() * dim floats.
  // With admission or eviction a missing row is not created (the push
  // creates it): its slot reads as zeros (an id never trained contributes
  // nothing, where a random initial row would add noise: +0.006 eval AUC on
  // generated data with fresh ids, bench/results/2026-12-02-tables.md).
  // ResourceExhausted when a new row would pass max_rows (rows created
  // before that point stay, as after any pull).
  absl::Status Pull(std::span<const uint64_t> ids, float* out);

  // Applies gradients grads[i * dim, (i + 1) * dim) of rows ids[i], each
  // multiplied by `scale` (the server passes 1 / samples). The gradients of
  // an id that occurs more than once are summed and the optimizer runs once
  // per row. Missing rows are created first (with admission: only those of
  // ids the push admits; the others' gradients are dropped). InvalidArgument,
  // with the table unchanged, for a non-finite scale or gradient (or a sum
  // of duplicates that overflows); ResourceExhausted as for Pull, before any
  // update. REQUIRES: grads holds ids.size() * dim floats.
  // `step`: the pushing worker's clock, which eviction's clock follows
  // (its largest value so far); -1: one tick per push.
  absl::Status Push(std::span<const uint64_t> ids, const float* grads, float scale,
                    float lr_scale = 1.0f, int64_t step = -1);

  // Calls fn for every row, in no particular order. For checkpoints/export.
  // An error only from a disk tier that cannot be read.
  absl::Status ForEachRow(absl::FunctionRef<void(const SparseRow&)> fn) const;

  // Sets row `id` (creating it if missing) to the given values, state and
  // step count. For checkpoint restore. InvalidArgument for wrong sizes,
  // ResourceExhausted past max_rows. With eviction the row counts as
  // updated now (once); the caller runs EvictToCapacity() after the rows
  // (with a disk tier rows also leave RAM as the restore goes; REQUIRES:
  // `id` is not on disk, as in a restore into an empty table).
  absl::Status InsertRow(uint64_t id, std::span<const float> values,
                         std::span<const float> state, uint32_t step = 0);

  // In RAM.
  bool Contains(uint64_t id) const { return store_.Find(id) != RowStore::kNoRow; }

  // Pre-sizes the index for `rows` rows (e.g. before a restore).
  void Reserve(size_t rows) { store_.Reserve(rows); }

  // Removes every row (RAM and disk) and frees its memory.
  absl::Status Clear();

  MemoryStats memory_stats() const;
  const AdmissionStats& admission_stats() const { return admission_stats_; }
  const EvictionStats& eviction_stats() const { return eviction_stats_; }
  const TierCounters& tier_counters() const { return tier_ ? tier_->counters() : kNoTier; }
  const DiskTier* tier() const { return tier_ ? tier_->disk() : nullptr; }

  // Eviction's clock: the largest push step seen (restore sets it to the
  // checkpoint's step).
  uint64_t clock() const { return clock_; }
  void AdvanceClock(uint64_t step) { clock_ = std::max(clock_, step); }
  // The rows this shard keeps with spec.eviction.max_rows (with a disk
  // tier: ram_capacity); 0: unbounded.
  size_t evict_capacity() const { return evict_capacity_; }
  // Removes rows until at most evict_capacity() are left (no-op without);
  // with a disk tier, until its RAM capacity is left in RAM, writing the
  // changed ones to disk (an error: fatal, see table_tier.h).
  absl::Status EvictToCapacity() { return Evict(/*sweep_budget=*/0); }
  // After a restore: the rows it wrote straight to the tier are committed.
  absl::Status FinishRestore();

  // Rows changed or removed since an export cut (delta exports).
  ChangeLog& changes() { return changes_; }
  const ChangeLog& changes() const { return changes_; }

  // The admission sketch; null without admission.
  const CountMinSketch* sketch() const { return admission_->sketch(); }
  // Adds saved counts into the sketch (restore; several shards may add).
  // No-op without admission.
  void MergeSketch(const CountMinSketch& saved) { admission_->MergeSketch(saved); }

 private:
  static const TierCounters kNoTier;

  SparseTable(const TableSpec& spec, Options options, std::unique_ptr<optim::Optimizer> optimizer,
              optim::Initializer initializer, std::unique_ptr<AdmissionFilter> admission,
              std::vector<std::unique_ptr<EvictionPolicy>> eviction);

  // rows[i] = row number of ids[i], creating missing rows (when !create:
  // kNoRow for a missing row; with a tier also for a row used on disk).
  // `pull`: a pull's lookup (it counts uses of rows on disk).
  absl::Status ResolveRows(std::span<const uint64_t> ids, uint32_t* rows, bool create = true,
                           bool pull = false);
  // Admission of a push: asks the filter about the ids missing from the
  // table (`raw_count` > 0: the push had that many ids before merging, see
  // merger_) and creates the rows of those admitted; rows[i] stays kNoRow
  // for a refused id.
  absl::Status AdmitRows(std::span<const uint64_t> unique, size_t raw_count, uint32_t* rows);
  uint32_t CreateRow(uint64_t id);
  absl::Status RowLimit(uint64_t id) const;
  bool OnDiskOnly(size_t pos) const { return tier_ && tier_->OnDiskOnly(pos); }
  absl::Status CheckGradients(std::span<const uint64_t> ids, const float* grads,
                              float scale) const;
  void ApplyRows(const uint32_t* rows, size_t n, const float* grads, float scale, float lr_scale);
  // After a request: the eviction policies (`sweep_budget` index slots for
  // a ttl sweep), or the tier's spill.
  absl::Status Evict(size_t sweep_budget);
  // The SparseRow view of a row's bytes (buffers of the table).
  SparseRow View(uint64_t id, const float* row) const;
  void TrimScratch();
  size_t ScratchBytes() const;

  const TableSpec spec_;
  const Options options_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const optim::Initializer initializer_;
  const RowLayout layout_;
  RowStore store_;

  // In front: which new ids get a row.
  const std::unique_ptr<AdmissionFilter> admission_;
  AdmissionStats admission_stats_;

  // Behind: capacity (LRU or LFU) then TTL, run after each push.
  const std::vector<std::unique_ptr<EvictionPolicy>> eviction_;
  EvictionStats eviction_stats_;
  // Rows carry RowMeta and the clock moves (eviction or a disk tier).
  const bool tracks_use_;
  // Rows are created by pushes only and a missing row reads as zeros:
  // spec.zero_untrained, admission, eviction or a tier.
  const bool pushes_create_;
  const size_t evict_capacity_;  // 0: no capacity limit
  uint64_t clock_ = 0;
  ChangeLog changes_;

  // Rows past the RAM capacity (Options::tier); null without.
  const std::unique_ptr<TableTier> tier_;

  // Row numbers of recent pulls, for their pushes (pull_memo.h): only where
  // a pull creates its rows and none moves or leaves but by Clear() (no
  // tier, eviction or admission).
  const bool memo_pulls_;
  PullMemo pull_memo_;

  // Per-call scratch, kept between calls to avoid allocations.
  GradientMerger merger_;
  std::vector<uint32_t> rows_;
  std::vector<uint32_t> multiplicity_;  // occurrences of each unique id (admission)
  std::vector<float> values_;           // compact: one row's values as fp32
  mutable std::vector<float> view_values_;  // compact: ForEachRow's row values
  uint64_t updates_ = 0;                // pushes applied (compact rounding noise)
};

}  // namespace pstrain::server
