// SparseTable's rows in and out as whole rows: the views that checkpoints
// and exports read (RAM rows, then rows only on disk), the inserts of a
// restore (rows past the RAM capacity go straight to the disk tier).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

// A restore into a table with a disk tier writes rows to disk this many at
// a time.
constexpr size_t kRestoreBatch = 4096;

}  // namespace

SparseRow SparseTable::View(uint64_t id, const float* row) const {
  SparseRow view;
  view.id = id;
  if (compact_) {
    view_values_.resize(dim_);
    LoadValues(row, view_values_.data());
    view.values = {view_values_.data(), dim_};
  } else {
    view.values = {row, dim_};
  }
  view.state = {row + value_floats_, state_floats_};
  if (has_step_) std::memcpy(&view.step, row + value_floats_ + state_floats_, sizeof(view.step));
  return view;
}

absl::Status SparseTable::ForEachRow(absl::FunctionRef<void(const SparseRow&)> fn) const {
  index_.ForEach([&](uint64_t id, uint32_t r) { fn(View(id, arena_.row(r))); });
  if (!tier_) return absl::OkStatus();
  // Then the rows only on disk (a row in RAM is current there).
  view_row_.resize(arena_.stride());
  return tier_->ForEach(spec_.id, row_bytes(), [&](uint64_t id, const char* bytes) {
    if (index_.Find(id) != RowIndex::kNoRow) return;
    std::memcpy(view_row_.data(), bytes, row_bytes());
    fn(View(id, view_row_.data()));
  });
}

void SparseTable::WriteRow(float* row, std::span<const float> values,
                           std::span<const float> state, uint32_t step) {
  if (compact_) {
    StoreValues(row, values.data(), /*noise_seed=*/0, /*stochastic=*/false);
  } else {
    std::copy(values.begin(), values.end(), row);
  }
  std::copy(state.begin(), state.end(), row + value_floats_);
  if (has_step_) std::memcpy(row + value_floats_ + state_floats_, &step, sizeof(step));
}

absl::Status SparseTable::InsertRow(uint64_t id, std::span<const float> values,
                                    std::span<const float> state, uint32_t step) {
  if (values.size() != dim_ || state.size() != state_floats_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table '", spec_.name, "': row ", id, " has ", values.size(), " values and ",
        state.size(), " state floats, want ", dim_, " and ", state_floats_));
  }
  uint32_t r;
  if (tier_) {
    // A restore: ids are unique across a checkpoint's files and the table
    // starts empty, so the disk holds none of them (no lookup per row).
    r = index_.Find(id);
    if (r == RowIndex::kNoRow && arena_.size() >= RamCapacity()) {
      // RAM is full: the row goes straight to the tier, clean, without
      // passing through RAM (no index churn, no victim search).
      restore_row_.assign(arena_.stride(), 0.0f);
      float* row = restore_row_.data();
      WriteRow(row, values, state, step);
      uint32_t* m = reinterpret_cast<uint32_t*>(row + meta_offset_);
      m[0] = static_cast<uint32_t>(clock_);
      m[1] = 1 | kOnDisk;
      tier_->Put(spec_.id, id, row, row_bytes());
      ++disk_rows_;
      ++tier_counters_.writes;
      if (++restore_puts_ >= kRestoreBatch) return FinishRestore();
      return absl::OkStatus();
    }
    if (r == RowIndex::kNoRow) {
      if (arena_.full()) {
        return absl::ResourceExhaustedError(
            absl::StrCat("sparse table '", spec_.name, "': the RAM rows are full"));
      }
      r = CreateRow(id);
    }
  } else {
    PS_RETURN_IF_ERROR(ResolveRows({&id, 1}, &r));
  }
  WriteRow(arena_.row(r), values, state, step);
  if (evicts_) {
    uint32_t* m = Meta(r);
    m[0] = static_cast<uint32_t>(clock_);
    m[1] = tier_ ? 1 | kDirty | (m[1] & kOnDisk) : 1;
  }
  return absl::OkStatus();
}

}  // namespace pstrain::server
