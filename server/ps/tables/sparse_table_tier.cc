// SparseTable's disk tier paths: rows read back from the tier into RAM
// (one batched read per request), and the end of a restore whose rows went
// partly straight to the tier.
#include "server/ps/tables/sparse_table.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

// Index lookups are prefetched this many misses ahead.
constexpr size_t kMissPrefetch = 16;

}  // namespace

absl::StatusOr<uint32_t> SparseTable::PromoteRow(uint64_t id, const char* src) {
  if (arena_.full()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sparse table '", spec_.name, "': the RAM rows are full"));
  }
  const uint32_t r = arena_.Append();
  std::memcpy(arena_.row(r), src, row_bytes());
  uint32_t* m = Meta(r);
  m[0] = static_cast<uint32_t>(clock_);  // used now
  m[1] = (m[1] & kCountMask) | kOnDisk;  // clean: the disk copy is current
  index_.Insert(id, r);
  return r;
}

absl::Status SparseTable::PromoteRows(std::span<const uint64_t> ids, uint32_t* rows,
                                      bool pull) {
  const size_t n = miss_pos_.size();
  const size_t bytes = row_bytes();
  miss_ids_.resize(n);
  for (size_t k = 0; k < n; ++k) miss_ids_[k] = ids[miss_pos_[k]];
  miss_rows_.resize(n * bytes);
  PS_RETURN_IF_ERROR(tier_->Get(spec_.id, miss_ids_, bytes, miss_rows_.data(), &miss_found_,
                                /*count_uses=*/pull, use_epoch_));
  tier_counters_.reads += n;
  if (pull && (window_uses_ += n) >= kUseWindowRams * RamCapacity()) {
    window_uses_ = 0;
    ++use_epoch_;  // every row's uses count half from now on
  }
  disk_of_.assign(ids.size(), RowIndex::kNoRow);
  for (size_t k = 0; k < n; ++k) {
    if (k + kMissPrefetch < n) index_.Prefetch(miss_ids_[k + kMissPrefetch]);
    if (!miss_found_[k]) continue;
    ++tier_counters_.hits;
    // An id twice in the request: the first may have brought it in.
    uint32_t r = index_.Find(miss_ids_[k]);
    if (r == RowIndex::kNoRow) {
      if (miss_found_[k] - 1 < kPromoteUses) {  // used from disk, where it stays
        disk_of_[miss_pos_[k]] = static_cast<uint32_t>(k);
        ++tier_counters_.served;
        continue;
      }
      PS_ASSIGN_OR_RETURN(r, PromoteRow(miss_ids_[k], miss_rows_.data() + k * bytes));
    }
    rows[miss_pos_[k]] = r;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::WriteBackDiskRows(std::span<const uint64_t> ids) {
  for (size_t i = 0; i < disk_of_.size(); ++i) {
    if (disk_of_[i] == RowIndex::kNoRow) continue;
    tier_->Put(spec_.id, ids[i], DiskRow(i), row_bytes());
    ++tier_counters_.writes;
  }
  return MarkFatal(Annotate(tier_->Commit(), absl::StrCat("sparse table '", spec_.name, "'")));
}


absl::Status SparseTable::FinishRestore() {
  if (!tier_ || restore_puts_ == 0) return absl::OkStatus();
  restore_puts_ = 0;
  PS_RETURN_IF_ERROR(
      MarkFatal(Annotate(tier_->Commit(), absl::StrCat("sparse table '", spec_.name, "'"))));
  // The tier's index grew with the rows written: the RAM rows restored
  // first make room for it, so the budget holds all through the restore.
  return EvictToCapacity();
}

}  // namespace pstrain::server
