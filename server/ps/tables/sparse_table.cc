#include "server/ps/tables/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/optim/finite.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

// Ids handled per block by Pull: the row numbers of a block stay in L1.
constexpr size_t kPullBlock = 1024;
// How far ahead lookups and row accesses are prefetched.
constexpr size_t kIndexPrefetch = 16;
constexpr size_t kRowPrefetch = 8;
// Scratch vectors larger than this many ids are freed after a call.
constexpr size_t kMaxRetainedIds = 1 << 16;

template <typename T>
void FreeVector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

const TierCounters SparseTable::kNoTier{};

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(const TableSpec& spec,
                                                                  Options options) {
  std::string what = absl::StrCat("sparse table '", spec.name, "' (id ", spec.id, ")");
  if (spec.kind != TableKind::kSparse) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": spec is not a sparse table"));
  }
  if (spec.dim == 0 || spec.dim > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dim ", spec.dim, " is outside [1, ", kMaxDim, "]"));
  }
  auto optimizer = optim::Optimizer::Create(spec.optimizer);
  if (!optimizer.ok()) return Annotate(optimizer.status(), what);
  auto initializer = optim::Initializer::Create(spec.init, spec.id);
  if (!initializer.ok()) return Annotate(initializer.status(), what);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<AdmissionFilter> admission, AdmissionFilter::Create(spec));
  if (spec.dtype != RowDtype::kFloat32 && spec.dtype != RowDtype::kFloat16 &&
      spec.dtype != RowDtype::kBfloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown dtype ", static_cast<int>(spec.dtype)));
  }
  const EvictionConfig& e = spec.eviction;
  options.max_rows = std::min(options.max_rows, kMaxRows);
  if (options.evict_capacity == 0) options.evict_capacity = e.max_rows;
  options.evict_capacity = std::min<uint64_t>(options.evict_capacity, kMaxRows);
  PS_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<EvictionPolicy>> eviction,
                      EvictionPolicy::Create(spec, options.evict_capacity));
  if (options.tier != nullptr) {
    if (e.enabled()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": a disk tier with max_rows or ttl_steps eviction is not built (rows leave RAM "
                "for the tier; none leave the tier)"));
    }
    if (options.ram_capacity == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a disk tier needs a RAM capacity"));
    }
  }
  return std::unique_ptr<SparseTable>(
      new SparseTable(spec, options, *std::move(optimizer), *std::move(initializer),
                      std::move(admission), std::move(eviction)));
}

SparseTable::SparseTable(const TableSpec& spec, Options options,
                         std::unique_ptr<optim::Optimizer> optimizer,
                         optim::Initializer initializer,
                         std::unique_ptr<AdmissionFilter> admission,
                         std::vector<std::unique_ptr<EvictionPolicy>> eviction)
    : spec_(spec),
      options_(options),
      optimizer_(std::move(optimizer)),
      initializer_(std::move(initializer)),
      layout_(spec, *optimizer_, /*meta=*/spec.eviction.enabled() || options.tier),
      store_(layout_),
      admission_(std::move(admission)),
      eviction_(std::move(eviction)),
      tracks_use_(spec.eviction.enabled() || options.tier),
      pushes_create_(spec.zero_untrained || !admission_->admits_all() || tracks_use_),
      evict_capacity_(options.tier                   ? options.ram_capacity
                      : spec.eviction.max_rows > 0 ? options.evict_capacity
                                                   : 0),
      tier_(options.tier ? std::make_unique<TableTier>(options.tier, spec, layout_,
                                                       options.ram_capacity, options.ram_row_cost)
                         : nullptr),
      memo_pulls_(!tracks_use_ && !pushes_create_ && options.tier == nullptr) {}

uint32_t SparseTable::CreateRow(uint64_t id) {
  const uint32_t r = store_.Add(id);
  float* row = store_.row(r);
  const size_t dim = layout_.dim();
  if (layout_.compact()) {
    values_.resize(dim);
    initializer_.FillRow(id, values_.data(), dim);
    layout_.StoreValues(row, values_.data(), /*noise_seed=*/0, /*stochastic=*/false);
  } else {
    initializer_.FillRow(id, row, dim);
  }
  if (layout_.state_floats() > 0) optimizer_->InitState(layout_.state(row), dim, dim);
  if (layout_.has_step()) layout_.set_step(row, 0);
  if (tracks_use_) {
    uint32_t* m = store_.meta(r);
    m[0] = static_cast<uint32_t>(clock_);
    m[1] = tier_ ? RowMeta::kDirty : 0;
  }
  if (tier_) tier_->OnRowCreated();
  return r;
}

absl::Status SparseTable::RowLimit(uint64_t id) const {
  if (store_.size() < options_.max_rows && !store_.full()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("sparse table '", spec_.name, "': cannot create row for id ", id,
                   ", the shard holds its limit of ", options_.max_rows, " rows"));
}

absl::Status SparseTable::ResolveRows(std::span<const uint64_t> ids, uint32_t* rows,
                                      bool create, bool pull) {
  const size_t n = ids.size();
  if (tier_) {
    PS_ASSIGN_OR_RETURN(const bool missed,
                        tier_->Lookup(ids, rows, pull, store_, static_cast<uint32_t>(clock_)));
    if (!missed || !create) return absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) {
    uint32_t r;
    if (tier_) {
      r = rows[i];
      if (r == RowStore::kNoRow) r = store_.Find(ids[i]);  // created for an earlier duplicate
    } else {
      if (i + kIndexPrefetch < n) store_.Prefetch(ids[i + kIndexPrefetch]);
      r = store_.Find(ids[i]);
    }
    if (r == RowStore::kNoRow && create && !OnDiskOnly(i)) {
      PS_RETURN_IF_ERROR(RowLimit(ids[i]));
      r = CreateRow(ids[i]);
    }
    rows[i] = r;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Pull(std::span<const uint64_t> ids, float* out) {
  if (tier_) ++clock_;
  const size_t dim = layout_.dim();
  rows_.resize(std::min(ids.size(), kPullBlock));
  if (memo_pulls_) pull_memo_.Begin(ids);
  absl::Status status;
  for (size_t begin = 0; begin < ids.size(); begin += kPullBlock) {
    const size_t n = std::min(kPullBlock, ids.size() - begin);
    // With zero_untrained, admission or eviction a pull creates no row: the push does.
    status = ResolveRows(ids.subspan(begin, n), rows_.data(), /*create=*/!pushes_create_,
                         /*pull=*/true);
    if (!status.ok()) break;
    if (memo_pulls_) pull_memo_.Record(begin, rows_.data(), n);
    float* dst = out + begin * dim;
    for (size_t i = 0; i < n; ++i) {
      if (i + kRowPrefetch < n && rows_[i + kRowPrefetch] != RowStore::kNoRow) {
        store_.PrefetchRow(rows_[i + kRowPrefetch]);
      }
      if (rows_[i] == RowStore::kNoRow) {
        if (OnDiskOnly(i)) {  // read from disk, not brought into RAM
          if (layout_.compact()) {
            layout_.LoadValues(tier_->DiskRow(i), dst + i * dim);
          } else {
            std::memcpy(dst + i * dim, tier_->DiskRow(i), dim * sizeof(float));
          }
        } else if (pushes_create_) {
          std::memset(dst + i * dim, 0, dim * sizeof(float));
        } else {
          initializer_.FillRow(ids[begin + i], dst + i * dim, dim);  // what CreateRow stores
        }
      } else if (layout_.compact()) {
        layout_.LoadValues(store_.row(rows_[i]), dst + i * dim);
      } else {
        std::memcpy(dst + i * dim, store_.row(rows_[i]), dim * sizeof(float));
      }
    }
  }
  if (memo_pulls_ && status.ok()) pull_memo_.Commit();
  // Rows brought from disk push others out of RAM.
  if (tier_ && status.ok()) status = EvictToCapacity();
  return status;
}

absl::Status SparseTable::CheckGradients(std::span<const uint64_t> ids, const float* grads,
                                         float scale) const {
  if (!std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table '", spec_.name,
                                                   "': non-finite gradient scale ", scale));
  }
  const size_t dim = layout_.dim();
  const size_t total = ids.size() * dim;
  const size_t bad = optim::FindNonFinite(grads, total);
  if (bad == total) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "sparse table '", spec_.name, "': non-finite gradient ", grads[bad], " for id ",
      ids[bad / dim], " (element ", bad % dim, ")"));
}

void SparseTable::ApplyRows(const uint32_t* rows, size_t n, const float* grads, float scale,
                            float lr_scale) {
  const size_t dim = layout_.dim();
  optim::UpdateArgs args;
  args.state_stride = dim;
  args.n = dim;
  args.scale = scale;
  args.lr_scale = lr_scale;
  for (size_t i = 0; i < n; ++i) {
    const bool on_disk = rows[i] == RowStore::kNoRow && OnDiskOnly(i);
    if (rows[i] == RowStore::kNoRow && !on_disk) continue;  // refused by admission
    if (i + kRowPrefetch < n && rows[i + kRowPrefetch] != RowStore::kNoRow) {
      store_.PrefetchRow<true>(rows[i + kRowPrefetch]);
    }
    float* row = on_disk ? tier_->DiskRow(i) : store_.row(rows[i]);
    float* weights = row;
    if (layout_.compact()) {
      values_.resize(dim);
      layout_.LoadValues(row, values_.data());
      weights = values_.data();
    }
    args.weights_in = weights;
    args.weights_out = weights;
    args.state = layout_.state(row);
    args.grads = grads + i * dim;
    if (layout_.has_step()) {
      uint32_t step = layout_.step(row);
      if (step != UINT32_MAX) ++step;
      layout_.set_step(row, step);
      args.step = step;
    }
    optimizer_->Apply(args);
    if (layout_.compact()) {
      // Rounding noise from the row and the update's ordinal: reproducible
      // run to run, independent between rows and updates.
      const uint64_t seed = on_disk ? Mix64(Mix64(tier_->DiskRowNumber(i) + 1) ^ updates_)
                                    : Mix64(uint64_t{rows[i]} << 32 ^ updates_);
      layout_.StoreValues(row, weights, seed, /*stochastic=*/true);
    }
    if (on_disk) {
      // Written back to its slot after the loop: clean, current on disk.
      uint32_t* m = layout_.meta(row);
      RowMeta::Touch(m, static_cast<uint32_t>(clock_));
      m[1] &= ~RowMeta::kDirty;
    } else if (tracks_use_) {
      RowMeta::Touch(store_.meta(rows[i]), static_cast<uint32_t>(clock_));
    }
  }
}

absl::Status SparseTable::Push(std::span<const uint64_t> ids, const float* grads, float scale,
                               float lr_scale, int64_t step) {
  PS_RETURN_IF_ERROR(CheckGradients(ids, grads, scale));
  ++updates_;
  if (tracks_use_) {
    // With a disk tier the clock counts requests (pulls too): recency of use.
    if (step >= 0 && !tier_) {
      AdvanceClock(static_cast<uint64_t>(step));
    } else {
      ++clock_;
    }
  }
  std::span<const uint64_t> unique = ids;
  const float* unique_grads = grads;
  const bool merged = merger_.Merge(ids, grads, layout_.dim());
  if (merged) {
    unique = merger_.unique();
    unique_grads = merger_.sums();
    absl::Status sum_ok = CheckGradients(unique, unique_grads, scale);
    if (!sum_ok.ok()) {
      TrimScratch();
      return Annotate(sum_ok, "after summing duplicate ids");
    }
  }
  // The rows of the pull of these ids, when it is remembered: no lookup.
  const uint32_t* rows = memo_pulls_ ? pull_memo_.Find(unique) : nullptr;
  absl::Status status;
  if (rows == nullptr) {
    rows_.resize(unique.size());
    status = admission_->admits_all()
                 ? ResolveRows(unique, rows_.data())
                 : AdmitRows(unique, merged ? ids.size() : 0, rows_.data());
    rows = rows_.data();
  }
  if (status.ok()) {
    ApplyRows(rows, unique.size(), unique_grads, scale, lr_scale);
    if (changes_.tracking()) {
      for (size_t i = 0; i < unique.size(); ++i) {
        if (rows[i] != RowStore::kNoRow || OnDiskOnly(i)) changes_.Changed(unique[i]);
      }
    }
    if (tier_ && tier_->used_disk_rows()) status = tier_->WriteBack(unique);
  }
  // The sweep looks at a few slots per pushed row: a whole pass over the
  // index takes about as many pushes as rows live, whatever the table size.
  if (tracks_use_) {
    absl::Status after = Evict(4 * unique.size() + 64);
    if (status.ok()) status = after;
  }
  TrimScratch();
  return status;
}

absl::Status SparseTable::AdmitRows(std::span<const uint64_t> unique, size_t raw_count,
                                    uint32_t* rows) {
  PS_RETURN_IF_ERROR(ResolveRows(unique, rows, /*create=*/false));
  // Occurrences of each unique id in the push (duplicates each count).
  multiplicity_.assign(raw_count > 0 ? unique.size() : 0, 0);
  for (size_t i = 0; i < raw_count; ++i) ++multiplicity_[merger_.occurrence(i)];
  uint64_t refused = 0;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (rows[i] != RowStore::kNoRow || OnDiskOnly(i)) continue;  // in RAM, or on disk
    if (!admission_->Admit(unique[i], raw_count > 0 ? multiplicity_[i] : 1)) {
      ++refused;
      continue;
    }
    PS_RETURN_IF_ERROR(RowLimit(unique[i]));
    rows[i] = CreateRow(unique[i]);
    ++admission_stats_.admitted;
  }
  admission_stats_.refused_ids += refused;
  if (refused > 0) ++admission_stats_.refused_pushes;
  return absl::OkStatus();
}

absl::Status SparseTable::Evict(size_t sweep_budget) {
  const uint32_t now = static_cast<uint32_t>(clock_);
  if (tier_) return tier_->Spill(store_, now);
  for (const std::unique_ptr<EvictionPolicy>& policy : eviction_) {
    policy->Evict(
        store_, now, sweep_budget,
        [this](size_t slot) { changes_.Removed(store_.RemoveAt(slot)); }, &eviction_stats_);
  }
  return absl::OkStatus();
}

SparseRow SparseTable::View(uint64_t id, const float* row) const {
  SparseRow view;
  view.id = id;
  if (layout_.compact()) {
    view_values_.resize(layout_.dim());
    layout_.LoadValues(row, view_values_.data());
    view.values = {view_values_.data(), layout_.dim()};
  } else {
    view.values = {row, layout_.dim()};
  }
  view.state = {layout_.state(row), layout_.state_floats()};
  view.step = layout_.step(row);
  return view;
}

absl::Status SparseTable::ForEachRow(absl::FunctionRef<void(const SparseRow&)> fn) const {
  store_.ForEach([&](uint64_t id, uint32_t r) { fn(View(id, store_.row(r))); });
  if (!tier_) return absl::OkStatus();
  // Then the rows only on disk.
  return tier_->ForEachDiskRow(store_,
                               [&](uint64_t id, const float* row) { fn(View(id, row)); });
}

absl::Status SparseTable::InsertRow(uint64_t id, std::span<const float> values,
                                    std::span<const float> state, uint32_t step) {
  if (values.size() != layout_.dim() || state.size() != layout_.state_floats()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table '", spec_.name, "': row ", id, " has ", values.size(), " values and ",
        state.size(), " state floats, want ", layout_.dim(), " and ", layout_.state_floats()));
  }
  const uint32_t now = static_cast<uint32_t>(clock_);
  uint32_t r;
  if (tier_) {
    // A restore: ids are unique across a checkpoint's files and the table
    // starts empty, so the disk holds none of them (no lookup per row).
    r = store_.Find(id);
    if (r == RowStore::kNoRow && store_.size() >= tier_->RamCapacity()) {
      // RAM is full: the row goes straight to the tier.
      if (tier_->InsertRestored(id, values, state, step, now)) return FinishRestore();
      return absl::OkStatus();
    }
    if (r == RowStore::kNoRow) {
      if (store_.full()) {
        return absl::ResourceExhaustedError(
            absl::StrCat("sparse table '", spec_.name, "': the RAM rows are full"));
      }
      r = CreateRow(id);
    }
  } else {
    PS_RETURN_IF_ERROR(ResolveRows({&id, 1}, &r));
  }
  layout_.Write(store_.row(r), values, state, step);
  if (tracks_use_) {
    uint32_t* m = store_.meta(r);
    m[0] = now;
    m[1] = tier_ ? 1 | RowMeta::kDirty | (m[1] & RowMeta::kOnDisk) : 1;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::FinishRestore() {
  if (!tier_) return absl::OkStatus();
  return tier_->FinishRestore(store_, static_cast<uint32_t>(clock_));
}

absl::Status SparseTable::Clear() {
  if (tier_) PS_RETURN_IF_ERROR(tier_->Clear());
  store_.Clear();
  pull_memo_.Clear();
  merger_.Free();
  FreeVector(rows_);
  FreeVector(multiplicity_);
  FreeVector(view_values_);
  admission_->Clear();
  return absl::OkStatus();
}

void SparseTable::TrimScratch() {
  if (rows_.capacity() > kMaxRetainedIds) FreeVector(rows_);
  if (multiplicity_.capacity() > kMaxRetainedIds) FreeVector(multiplicity_);
  merger_.Trim(kMaxRetainedIds, layout_.dim());
}

size_t SparseTable::ScratchBytes() const {
  return rows_.capacity() * sizeof(uint32_t) + merger_.bytes() +
         multiplicity_.capacity() * sizeof(uint32_t) + pull_memo_.bytes();
}

MemoryStats SparseTable::memory_stats() const {
  MemoryStats stats;
  stats.rows = store_.size();
  stats.value_bytes = stats.rows * layout_.value_floats() * sizeof(float);
  stats.state_bytes = stats.rows * (layout_.stride() - layout_.value_floats()) * sizeof(float);
  stats.index_bytes = store_.index_bytes();
  stats.scratch_bytes = ScratchBytes();
  stats.sketch_bytes = admission_->bytes();
  stats.ram_rows = store_.size();
  stats.disk_rows = tier_ ? tier_->disk_rows() : 0;
  if (tier_) stats.rows = size();
  stats.total_bytes = store_.arena_bytes() + stats.index_bytes + stats.scratch_bytes +
                      stats.sketch_bytes + sizeof(*this) + (tier_ ? sizeof(TableTier) : 0);
  return stats;
}

}  // namespace pstrain::server
