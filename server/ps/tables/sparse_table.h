// SparseTable: one server's shard of a sparse parameter table, mapping a
// 64-bit feature id to a row of `dim` floats plus its optimizer state.
//
// Rows are created on first pull or push with the table's deterministic
// initializer (common/optim/initializer.h), so a row's first value does not
// depend on which server holds it. With admission (spec.admission enabled)
// a row is created only by a push that admits its id (a count-min sketch of
// push occurrences reaching min_count, or a coin of admit_probability); a
// pull of an id without a row reads zeros, without storing anything, and
// the gradients of a refused id are dropped and counted. With eviction (spec.eviction enabled; see EvictionConfig) rows
// are likewise created by pushes only, and rows past the shard's capacity,
// or not updated for ttl_steps, are removed after each push
// (sparse_table_evict.cc): a bounded amount of work per push on the owner
// thread, no pause. A row is stored as
//   [dim values][optimizer state floats][step count, Adam only]
//   [last update clock, push count: with eviction only]
// where the values are floats, or with dtype fp16/bf16 16-bit values padded
// to a float (common/half.h; state stays fp32), converted on each pull and
// push (the update rounded stochastically).
// in an arena of 2 MiB huge-page chunks (growth adds chunks, it never
// copies the table); the id -> row map is an open-addressing index. Beyond
// values and state a row costs its index slot (15 to 22.5 bytes) and a
// sliver of the last chunk.
//
// With a disk tier (Options::tier, --server_memory_budget) the table keeps
// at most Options::ram_capacity rows in RAM and the rest in the tier
// (disk_tier.h): after each request the rows past the RAM capacity (the
// least recently used of a sample, as for max_rows) leave RAM, written to
// disk when changed since they were read (or new); a request for an id not
// in RAM looks it up on disk in one batched read and keeps the row in RAM.
// Rows are then created by pushes only, as with eviction, and size()
// counts the rows in RAM and on disk. ForEachRow visits both (a consistent
// view: every call comes from the owner thread). A tier that fails (a full
// disk) fails the request with an error marked fatal (IsFatal): the server
// stops, and its committed checkpoints stay as they were.
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
#include "server/ps/tables/change_log.h"
#include "server/ps/tables/count_min_sketch.h"
#include "server/ps/tables/disk_tier.h"
#include "server/ps/tables/row_arena.h"
#include "server/ps/tables/pull_memo.h"
#include "server/ps/tables/row_index.h"

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

// Eviction counters of a table shard since it was created (not saved).
struct EvictionStats {
  uint64_t capacity = 0;  // rows removed to stay within max_rows
  uint64_t ttl = 0;       // rows removed after ttl_steps without an update
};

// Disk tier counters of a table shard since it was created (not saved).
struct TierCounters {
  uint64_t reads = 0;   // ids not in RAM looked up on disk
  uint64_t hits = 0;    // of them, found there
  uint64_t served = 0;  // of the hits, used from disk without coming into RAM
  uint64_t writes = 0;  // rows written to disk on leaving RAM
  uint64_t drops = 0;   // rows that left RAM unchanged (their disk copy is current)
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
  // Row clocks are 32-bit: ages up to 2^31 compare right across a wrap.
  static constexpr uint64_t kMaxTtlSteps = (uint64_t{1} << 31) - 1;

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
  // and valid optimizer and initializer configs.
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const TableSpec& spec,
                                                             Options options);
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const TableSpec& spec) {
    return Create(spec, Options());
  }

  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;

  const TableSpec& spec() const { return spec_; }
  size_t dim() const { return dim_; }
  // Optimizer state floats per row (Adam's step count not included).
  size_t state_floats() const { return state_floats_; }
  // Rows of the shard (with a disk tier: in RAM and on disk).
  size_t size() const { return tier_ ? disk_rows_ + ram_fresh_ : arena_.size(); }
  size_t ram_rows() const { return arena_.size(); }
  // Bytes a row takes in RAM (values, state, metadata; not the index).
  size_t row_bytes() const { return arena_.stride() * sizeof(float); }

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
  // ids the push admits; the others' gradients are dropped). InvalidArgument, with the table
  // unchanged, for a non-finite scale or gradient (or a sum of duplicates
  // that overflows); ResourceExhausted as for Pull, before any update.
  // REQUIRES: grads holds ids.size() * dim floats.
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
  bool Contains(uint64_t id) const { return index_.Find(id) != RowIndex::kNoRow; }

  // Pre-sizes the index for `rows` rows (e.g. before a restore).
  void Reserve(size_t rows) { index_.Reserve(rows); }

  // Removes every row (RAM and disk) and frees its memory.
  absl::Status Clear();

  MemoryStats memory_stats() const;
  const AdmissionStats& admission_stats() const { return admission_stats_; }
  const EvictionStats& eviction_stats() const { return eviction_stats_; }
  const TierCounters& tier_counters() const { return tier_counters_; }
  const DiskTier* tier() const { return tier_; }

  // Eviction's clock: the largest push step seen (restore sets it to the
  // checkpoint's step).
  uint64_t clock() const { return clock_; }
  void AdvanceClock(uint64_t step) { clock_ = std::max(clock_, step); }
  // The rows this shard keeps with spec.eviction.max_rows; 0: unbounded.
  size_t evict_capacity() const { return evict_capacity_; }
  // Removes rows until at most evict_capacity() are left (no-op without);
  // with a disk tier, until ram_capacity rows are left in RAM, writing the
  // changed ones to disk (an error: fatal, see above).
  absl::Status EvictToCapacity();
  // The RAM rows a tiered table keeps: ram_capacity less its tier index
  // (Options::ram_row_cost).
  size_t RamCapacity() const;
  // After a restore: the rows it wrote straight to the tier are committed.
  absl::Status FinishRestore();
  // Writes a restored row's values, state and step into `row` (stride floats).
  void WriteRow(float* row, std::span<const float> values, std::span<const float> state,
                uint32_t step);

  // Rows changed or removed since an export cut (delta exports).
  ChangeLog& changes() { return changes_; }
  const ChangeLog& changes() const { return changes_; }

  // The admission sketch; null without admission.
  const CountMinSketch* sketch() const { return sketch_.get(); }
  // Adds saved counts into the sketch (restore; several shards may add).
  // No-op without admission.
  void MergeSketch(const CountMinSketch& saved) {
    if (sketch_) sketch_->MergeFrom(saved);
  }

 private:
  SparseTable(const TableSpec& spec, Options options, std::unique_ptr<optim::Optimizer> optimizer,
              optim::Initializer initializer);

  // rows[i] = row number of ids[i], creating missing rows (when !create:
  // kNoRow for a missing row).
  // `pull`: a pull's lookup (it counts uses of rows on disk).
  absl::Status ResolveRows(std::span<const uint64_t> ids, uint32_t* rows, bool create = true,
                           bool pull = false);
  // Admission of a push: counts the occurrences of ids missing from the
  // table and creates the rows of those admitted; rows[i] stays kNoRow for
  // a refused id.
  absl::Status AdmitRows(std::span<const uint64_t> unique, size_t raw_count, uint32_t* rows);
  bool AdmitOne(uint64_t id, uint32_t occurrences);
  uint32_t CreateRow(uint64_t id);
  // Disk tier: reads the rows of ids[miss[k]] not in RAM from disk and
  // brings those used enough into RAM (rows[miss[k]] = their row numbers;
  // kNoRow where the tier lacks them or disk_of_ says where they are).
  absl::Status PromoteRows(std::span<const uint64_t> ids, uint32_t* rows, bool pull);
  // Copies the row of `id` read from the tier at `src` into a new RAM row.
  absl::StatusOr<uint32_t> PromoteRow(uint64_t id, const char* src);
  // The SparseRow view of a row's bytes (buffers of the table).
  SparseRow View(uint64_t id, const float* row) const;
  // Compact rows: the dim values of `row` as fp32, and back (stochastic:
  // rounding noise drawn from noise_seed; else to nearest).
  void LoadValues(const float* row, float* out) const;
  void StoreValues(float* row, const float* in, uint64_t noise_seed, bool stochastic);
  // Fills unique_ids_ and merged_ and returns true when `ids` has duplicates.
  bool MergeDuplicates(std::span<const uint64_t> ids, const float* grads);
  absl::Status CheckGradients(std::span<const uint64_t> ids, const float* grads,
                              float scale) const;
  void ApplyRows(const uint32_t* rows, size_t n, const float* grads, float scale, float lr_scale);
  void TrimScratch();
  size_t ScratchBytes() const;

  // Eviction (sparse_table_evict.cc). Row metadata: [clock, count] u32s.
  uint32_t* Meta(uint32_t r) { return reinterpret_cast<uint32_t*>(arena_.row(r) + meta_offset_); }
  const uint32_t* Meta(uint32_t r) const {
    return reinterpret_cast<const uint32_t*>(arena_.row(r) + meta_offset_);
  }
  // Metadata word 1: the push count (low 30 bits, saturating) and, with a
  // disk tier, whether the row has a copy on disk and whether it changed
  // since (a dirty row is written back when it leaves RAM).
  static constexpr uint32_t kCountMask = (1u << 30) - 1;
  static constexpr uint32_t kOnDisk = 1u << 30;
  static constexpr uint32_t kDirty = 1u << 31;
  // Marks row r updated at the current clock (a push applied to it).
  void TouchRow(uint32_t r) { TouchMeta(Meta(r)); }
  void TouchMeta(uint32_t* m) {
    m[0] = static_cast<uint32_t>(clock_);
    uint32_t count = m[1] & kCountMask;
    if (count != kCountMask) ++count;
    m[1] = count | kDirty | (m[1] & kOnDisk);
  }
  // After a request: removes rows past capacity, then sweeps `budget`
  // index slots for rows past their ttl.
  absl::Status AfterRequest(size_t budget);
  void SweepExpired(size_t budget);
  // The index slot of the row a sample judges the best to drop.
  size_t SampleVictim();
  // Removes the row at index slot `slot` (`to_disk`: it moved to the disk
  // tier; else it is gone, and the change log notes it).
  void RemoveAt(size_t slot, bool to_disk = false);

  const TableSpec spec_;
  const Options options_;
  const size_t dim_;
  const size_t state_floats_;
  const bool has_step_;  // Adam: a step count after the state
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const optim::Initializer initializer_;
  // fp16/bf16 values (spec.dtype): dim 16-bit values in the first
  // value_floats_ floats of a row; else dim floats.
  const bool compact_;
  const size_t value_floats_;

  RowIndex index_;
  RowArena arena_;
  std::unique_ptr<CountMinSketch> sketch_;  // with admission only
  AdmissionStats admission_stats_;

  // Eviction.
  const bool evicts_;           // spec.eviction.enabled()
  // Rows are created by pushes only and a missing row reads as zeros:
  // spec.zero_untrained, admission or eviction.
  const bool pushes_create_;
  const size_t meta_offset_;    // floats before a row's metadata
  const size_t evict_capacity_; // 0: no capacity limit
  uint64_t clock_ = 0;
  size_t sweep_pos_ = 0;        // next index slot of the ttl sweep
  uint64_t sample_state_;       // xorshift state of SampleVictim
  EvictionStats eviction_stats_;
  ChangeLog changes_;

  // Disk tier (Options::tier): rows of this table on disk, and rows in RAM
  // without a disk copy; size() is their sum.
  DiskTier* const tier_;
  size_t disk_rows_ = 0;
  size_t ram_fresh_ = 0;
  TierCounters tier_counters_;
  std::vector<uint32_t> miss_pos_;
  std::vector<uint64_t> miss_ids_;
  std::vector<char> miss_rows_;
  std::vector<uint8_t> miss_found_;
  // Which rows a miss brings into RAM (sparse_table_tier.cc). The slot
  // store counts a row's uses while it is on disk: each pull that reads it
  // is one, halved after each RAM capacity of such reads. A row
  // comes into RAM when a pull or push finds kPromoteUses of them; until
  // then it is read, and updated, on disk: the many ids used once do not
  // push hot rows out of RAM (TinyLFU's doorkeeper, in effect; measured in
  // bench/results/2026-12-03-tier-admission.md). RocksDB keeps no counts:
  // its rows come into RAM at once.
  static constexpr uint16_t kPromoteUses = 2;
  static constexpr uint64_t kUseWindowRams = 1;
  uint16_t use_epoch_ = 0;
  uint64_t window_uses_ = 0;
  // Per position of the request: its row in miss_rows_ when it is used from
  // disk, else RowIndex::kNoRow.
  std::vector<uint32_t> disk_of_;
  float* DiskRow(size_t pos) {
    return reinterpret_cast<float*>(miss_rows_.data() + size_t{disk_of_[pos]} * row_bytes());
  }
  bool OnDiskOnly(size_t pos) const {
    return pos < disk_of_.size() && disk_of_[pos] != RowIndex::kNoRow;
  }
  // Writes the rows a push updated on disk back to their slots.
  absl::Status WriteBackDiskRows(std::span<const uint64_t> ids);
  mutable std::vector<float> view_row_;  // ForEachRow: a disk row, aligned
  std::vector<float> restore_row_;       // InsertRow: a row bound for the tier
  size_t restore_puts_ = 0;              // tier writes of InsertRow not committed

  // Row numbers of recent pulls, for their pushes (pull_memo.h): only where
  // a pull creates its rows and none moves or leaves but by Clear() (no
  // tier, eviction or admission).
  const bool memo_pulls_;
  PullMemo pull_memo_;

  // Per-call scratch, kept between calls to avoid allocations.
  std::vector<uint32_t> rows_;
  std::vector<uint64_t> unique_ids_;
  std::vector<float> merged_;
  std::vector<uint32_t> occurrence_;  // position in unique_ids_ of each id
  std::vector<uint64_t> dedup_keys_;
  std::vector<uint32_t> dedup_pos_;
  std::vector<uint32_t> multiplicity_;  // occurrences of each unique id (admission)
  std::vector<float> values_;           // compact: one row's values as fp32
  mutable std::vector<float> view_values_;  // compact: ForEachRow's row values
  uint64_t updates_ = 0;                // pushes applied (compact rounding noise)
};

}  // namespace pstrain::server
