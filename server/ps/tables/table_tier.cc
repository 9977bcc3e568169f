#include "server/ps/tables/table_tier.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

// Index lookups are prefetched this many ids (or misses) ahead.
constexpr size_t kIndexPrefetch = 16;
constexpr size_t kMissPrefetch = 16;
// For the RAM rows' victims, where each request's misses each push a row
// out of RAM: fewer samples (each one a cache miss), close to LRU for a
// cache.
constexpr int kTierSamples = 8;
// A restore writes rows to disk this many at a time.
constexpr size_t kRestoreBatch = 4096;

}  // namespace

TableTier::TableTier(DiskTier* tier, const TableSpec& spec, const RowLayout& layout,
                     size_t ram_capacity, size_t ram_row_cost)
    : tier_(tier),
      table_id_(spec.id),
      name_(spec.name),
      layout_(layout),
      row_bytes_(layout.row_bytes()),
      ram_capacity_(ram_capacity),
      ram_row_cost_(ram_row_cost),
      victims_(ram_capacity, Mix64(spec.id + 1) | 1, kTierSamples) {}

size_t TableTier::RamCapacity() const {
  if (ram_row_cost_ == 0) return ram_capacity_;
  constexpr size_t kMinRows = 1024;
  const size_t less = tier_->index_bytes(table_id_) / ram_row_cost_;
  return std::max(kMinRows, ram_capacity_ > less ? ram_capacity_ - less : 0);
}

absl::Status TableTier::Commit() {
  return MarkFatal(Annotate(tier_->Commit(), absl::StrCat("sparse table '", name_, "'")));
}

absl::StatusOr<bool> TableTier::Lookup(std::span<const uint64_t> ids, uint32_t* rows, bool pull,
                                       RowStore& store, uint32_t now) {
  const size_t n = ids.size();
  miss_pos_.clear();
  disk_of_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (i + kIndexPrefetch < n) store.Prefetch(ids[i + kIndexPrefetch]);
    rows[i] = store.Find(ids[i]);
    if (rows[i] == RowStore::kNoRow) {
      miss_pos_.push_back(static_cast<uint32_t>(i));
    } else {
      RowMeta::Use(store.meta(rows[i]), now);
    }
  }
  if (miss_pos_.empty()) return false;
  PS_RETURN_IF_ERROR(MarkFatal(Promote(ids, rows, pull, store, now)));
  return true;
}

absl::StatusOr<uint32_t> TableTier::PromoteRow(uint64_t id, const char* src, RowStore& store,
                                               uint32_t now) {
  if (store.full()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sparse table '", name_, "': the RAM rows are full"));
  }
  const uint32_t r = store.Add(id);
  std::memcpy(store.row(r), src, row_bytes_);
  uint32_t* m = store.meta(r);
  m[0] = now;                                              // used now
  m[1] = (m[1] & RowMeta::kCountMask) | RowMeta::kOnDisk;  // clean: the disk copy is current
  return r;
}

absl::Status TableTier::Promote(std::span<const uint64_t> ids, uint32_t* rows, bool pull,
                                RowStore& store, uint32_t now) {
  const size_t n = miss_pos_.size();
  miss_ids_.resize(n);
  for (size_t k = 0; k < n; ++k) miss_ids_[k] = ids[miss_pos_[k]];
  miss_rows_.resize(n * row_bytes_);
  PS_RETURN_IF_ERROR(tier_->Get(table_id_, miss_ids_, row_bytes_, miss_rows_.data(), &miss_found_,
                                /*count_uses=*/pull, use_epoch_));
  counters_.reads += n;
  if (pull && (window_uses_ += n) >= kUseWindowRams * RamCapacity()) {
    window_uses_ = 0;
    ++use_epoch_;  // every row's uses count half from now on
  }
  disk_of_.assign(ids.size(), RowStore::kNoRow);
  for (size_t k = 0; k < n; ++k) {
    if (k + kMissPrefetch < n) store.Prefetch(miss_ids_[k + kMissPrefetch]);
    if (!miss_found_[k]) continue;
    ++counters_.hits;
    // An id twice in the request: the first may have brought it in.
    uint32_t r = store.Find(miss_ids_[k]);
    if (r == RowStore::kNoRow) {
      if (miss_found_[k] - 1 < kPromoteUses) {  // used from disk, where it stays
        disk_of_[miss_pos_[k]] = static_cast<uint32_t>(k);
        ++counters_.served;
        continue;
      }
      PS_ASSIGN_OR_RETURN(r, PromoteRow(miss_ids_[k], miss_rows_.data() + k * row_bytes_, store,
                                        now));
    }
    rows[miss_pos_[k]] = r;
  }
  return absl::OkStatus();
}

absl::Status TableTier::WriteBack(std::span<const uint64_t> ids) {
  for (size_t i = 0; i < disk_of_.size(); ++i) {
    if (disk_of_[i] == RowStore::kNoRow) continue;
    tier_->Put(table_id_, ids[i], DiskRow(i), row_bytes_);
    ++counters_.writes;
  }
  return Commit();
}

absl::Status TableTier::Spill(RowStore& store, uint32_t now) {
  const size_t capacity = RamCapacity();
  // A row goes to disk when it has no copy there or changed since; the
  // batch is written once, after the loop.
  while (store.size() > capacity) {
    const size_t slot = victims_.PickVictim(store, now);
    uint64_t id;
    const uint32_t r = store.SlotRow(slot, &id);
    uint32_t* m = store.meta(r);
    if ((m[1] & RowMeta::kOnDisk) == 0 || (m[1] & RowMeta::kDirty) != 0) {
      if ((m[1] & RowMeta::kOnDisk) == 0) {
        ++disk_rows_;
        --ram_fresh_;
      }
      m[1] = (m[1] & RowMeta::kCountMask) | RowMeta::kOnDisk;
      tier_->Put(table_id_, id, store.row(r), row_bytes_);
      ++counters_.writes;
    } else {
      ++counters_.drops;
    }
    store.RemoveAt(slot);  // moved to disk: not a removal for the change log
  }
  // The capacity falls as the tier's index grows: the RAM of the rows that
  // left goes back too.
  store.Compact();
  return Commit();
}

bool TableTier::InsertRestored(uint64_t id, std::span<const float> values,
                               std::span<const float> state, uint32_t step, uint32_t now) {
  restore_row_.assign(layout_.stride(), 0.0f);
  float* row = restore_row_.data();
  layout_.Write(row, values, state, step);
  uint32_t* m = layout_.meta(row);
  m[0] = now;
  m[1] = 1 | RowMeta::kOnDisk;
  tier_->Put(table_id_, id, row, row_bytes_);
  ++disk_rows_;
  ++counters_.writes;
  return ++restore_puts_ >= kRestoreBatch;
}

absl::Status TableTier::FinishRestore(RowStore& store, uint32_t now) {
  if (restore_puts_ == 0) return absl::OkStatus();
  restore_puts_ = 0;
  PS_RETURN_IF_ERROR(Commit());
  return Spill(store, now);
}

absl::Status TableTier::ForEachDiskRow(
    const RowStore& store, absl::FunctionRef<void(uint64_t id, const float* row)> fn) const {
  view_row_.resize(layout_.stride());
  return tier_->ForEach(table_id_, row_bytes_, [&](uint64_t id, const char* bytes) {
    if (store.Find(id) != RowStore::kNoRow) return;
    std::memcpy(view_row_.data(), bytes, row_bytes_);
    fn(id, view_row_.data());
  });
}

absl::Status TableTier::Clear() {
  PS_RETURN_IF_ERROR(tier_->Clear(table_id_));
  disk_rows_ = 0;
  ram_fresh_ = 0;
  return absl::OkStatus();
}

}  // namespace pstrain::server
