#include "server/ps/tables/sparse_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/hash.h"
#include "common/optim/finite.h"
#include "common/status.h"
#include "server/ps/tables/row_footprint.h"

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
  const AdmissionConfig& a = spec.admission;
  if (a.min_count < 1 || a.min_count > CountMinSketch::kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": min_count ", a.min_count,
                                                   " is outside [1, ", CountMinSketch::kMaxCount,
                                                   "]"));
  }
  if (!(a.admit_probability > 0.0f && a.admit_probability <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": admit_probability ", a.admit_probability, " is outside (0, 1]"));
  }
  if (spec.dtype != RowDtype::kFloat32 && spec.dtype != RowDtype::kFloat16 &&
      spec.dtype != RowDtype::kBfloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown dtype ", static_cast<int>(spec.dtype)));
  }
  const EvictionConfig& e = spec.eviction;
  if (e.policy != EvictPolicy::kLru && e.policy != EvictPolicy::kLfu) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown eviction policy ",
                                                   static_cast<int>(e.policy)));
  }
  if (e.ttl_steps > kMaxTtlSteps) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ttl_steps ", e.ttl_steps,
                                                   " is above ", kMaxTtlSteps));
  }
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
  options.max_rows = std::min(options.max_rows, kMaxRows);
  if (options.evict_capacity == 0) options.evict_capacity = e.max_rows;
  options.evict_capacity = std::min<uint64_t>(options.evict_capacity, kMaxRows);
  return std::unique_ptr<SparseTable>(
      new SparseTable(spec, options, *std::move(optimizer), *std::move(initializer)));
}

SparseTable::SparseTable(const TableSpec& spec, Options options,
                         std::unique_ptr<optim::Optimizer> optimizer,
                         optim::Initializer initializer)
    : spec_(spec),
      options_(options),
      dim_(spec.dim),
      state_floats_(optimizer->StateFloats(spec.dim)),
      has_step_(optimizer->uses_step()),
      optimizer_(std::move(optimizer)),
      initializer_(std::move(initializer)),
      compact_(spec.dtype != RowDtype::kFloat32),
      value_floats_(compact_ ? (dim_ + 1) / 2 : dim_),
      arena_(RowStrideFloats(spec, *optimizer_, spec.eviction.enabled() || options.tier)),
      evicts_(spec.eviction.enabled() || options.tier),
      pushes_create_(spec.zero_untrained || spec.admission.enabled() || evicts_),
      meta_offset_(value_floats_ + state_floats_ + (has_step_ ? 1 : 0)),
      evict_capacity_(options.tier                   ? options.ram_capacity
                      : spec.eviction.max_rows > 0 ? options.evict_capacity
                                                   : 0),
      sample_state_(Mix64(spec.id + 1) | 1),
      tier_(options.tier),
      memo_pulls_(!evicts_ && !pushes_create_ && options.tier == nullptr) {
  if (spec.admission.enabled()) {
    sketch_ = std::make_unique<CountMinSketch>(
        CountMinSketch::WidthForBudget(spec.admission.sketch_bytes));
  }
}

void SparseTable::LoadValues(const float* row, float* out) const {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(row);
  if (spec_.dtype == RowDtype::kFloat16) {
    size_t c = 0;
#ifdef __F16C__
    for (; c + 8 <= dim_; c += 8) {
      _mm256_storeu_ps(out + c,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + c))));
    }
#endif
    for (; c < dim_; ++c) out[c] = HalfToFloat(v[c]);
  } else {
    for (size_t c = 0; c < dim_; ++c) out[c] = Bfloat16ToFloat(v[c]);
  }
}

void SparseTable::StoreValues(float* row, const float* in, uint64_t noise_seed, bool stochastic) {
  uint16_t* v = reinterpret_cast<uint16_t*>(row);
  if (!stochastic) {
    for (size_t c = 0; c < dim_; ++c) {
      v[c] = spec_.dtype == RowDtype::kFloat16 ? FloatToHalf(in[c]) : FloatToBfloat16(in[c]);
    }
    return;
  }
  // 16 noise bits per value, four values per 64-bit draw; fp16 drops 13
  // bits of an fp32 mantissa, bf16 16: the noise is cut to the bits dropped.
  uint32_t noise[4];
  auto draw = [&](size_t c) {
    const uint64_t n = Mix64(noise_seed + c);
    for (int k = 0; k < 4; ++k) noise[k] = static_cast<uint32_t>(n >> (16 * k)) & 0xffffu;
  };
  if (spec_.dtype == RowDtype::kBfloat16) {
    for (size_t c = 0; c < dim_; ++c) {
      if (c % 4 == 0) draw(c);
      v[c] = FloatToBfloat16(in[c], true, noise[c % 4]);
    }
    return;
  }
  size_t c = 0;
#ifdef __F16C__
  // Noise added below the 13 bits fp16 keeps, then truncation: stochastic
  // rounding for values in fp16's normal range (below 2^-14 the dropped
  // bits are more than 13 and the rounding leans towards zero by less
  // than 2^-24).
  for (; c + 8 <= dim_; c += 8) {
    alignas(32) uint32_t lanes[8];
    draw(c);
    for (int k = 0; k < 4; ++k) lanes[k] = noise[k] >> 3;
    draw(c + 4);
    for (int k = 0; k < 4; ++k) lanes[4 + k] = noise[k] >> 3;
    const __m256i bits = _mm256_add_epi32(_mm256_castps_si256(_mm256_loadu_ps(in + c)),
                                          _mm256_load_si256(reinterpret_cast<__m256i*>(lanes)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(v + c),
                     _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_ZERO));
  }
#endif
  for (; c < dim_; ++c) {
    if (c % 4 == 0) draw(c);
    v[c] = FloatToHalf(in[c], true, noise[c % 4] >> 3);
  }
}

uint32_t SparseTable::CreateRow(uint64_t id) {
  uint32_t r = arena_.Append();
  float* row = arena_.row(r);
  if (compact_) {
    values_.resize(dim_);
    initializer_.FillRow(id, values_.data(), dim_);
    StoreValues(row, values_.data(), /*noise_seed=*/0, /*stochastic=*/false);
  } else {
    initializer_.FillRow(id, row, dim_);
  }
  if (state_floats_ > 0) optimizer_->InitState(row + value_floats_, dim_, dim_);
  if (has_step_) std::memset(row + value_floats_ + state_floats_, 0, sizeof(float));
  if (evicts_) {
    uint32_t* m = Meta(r);
    m[0] = static_cast<uint32_t>(clock_);
    m[1] = tier_ ? kDirty : 0;
  }
  if (tier_) ++ram_fresh_;
  index_.Insert(id, r);
  return r;
}

absl::Status SparseTable::ResolveRows(std::span<const uint64_t> ids, uint32_t* rows,
                                      bool create, bool pull) {
  const size_t n = ids.size();
  if (tier_) {
    miss_pos_.clear();
    disk_of_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (i + kIndexPrefetch < n) index_.Prefetch(ids[i + kIndexPrefetch]);
      rows[i] = index_.Find(ids[i]);
      if (rows[i] == RowIndex::kNoRow) {
        miss_pos_.push_back(static_cast<uint32_t>(i));
      } else {
        // Used now: for LRU the clock, for LFU one more use.
        uint32_t* m = Meta(rows[i]);
        m[0] = static_cast<uint32_t>(clock_);
        if ((m[1] & kCountMask) != kCountMask) ++m[1];
      }
    }
    if (miss_pos_.empty()) return absl::OkStatus();
    PS_RETURN_IF_ERROR(MarkFatal(PromoteRows(ids, rows, pull)));
    if (!create) return absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) {
    uint32_t r;
    if (tier_) {
      r = rows[i];
      if (r == RowIndex::kNoRow) r = index_.Find(ids[i]);  // created for an earlier duplicate
    } else {
      if (i + kIndexPrefetch < n) index_.Prefetch(ids[i + kIndexPrefetch]);
      r = index_.Find(ids[i]);
    }
    if (r == RowIndex::kNoRow && create && !OnDiskOnly(i)) {
      if (arena_.size() >= options_.max_rows || arena_.full()) {
        return absl::ResourceExhaustedError(
            absl::StrCat("sparse table '", spec_.name, "': cannot create row for id ", ids[i],
                         ", the shard holds its limit of ", options_.max_rows, " rows"));
      }
      r = CreateRow(ids[i]);
    }
    rows[i] = r;
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Pull(std::span<const uint64_t> ids, float* out) {
  if (tier_) ++clock_;
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
    float* dst = out + begin * dim_;
    for (size_t i = 0; i < n; ++i) {
      if (i + kRowPrefetch < n && rows_[i + kRowPrefetch] != RowIndex::kNoRow) {
        arena_.Prefetch(rows_[i + kRowPrefetch]);
      }
      if (rows_[i] == RowIndex::kNoRow) {
        if (OnDiskOnly(i)) {  // read from disk, not brought into RAM
          if (compact_) {
            LoadValues(DiskRow(i), dst + i * dim_);
          } else {
            std::memcpy(dst + i * dim_, DiskRow(i), dim_ * sizeof(float));
          }
        } else if (pushes_create_) {
          std::memset(dst + i * dim_, 0, dim_ * sizeof(float));
        } else {
          initializer_.FillRow(ids[begin + i], dst + i * dim_, dim_);  // what CreateRow stores
        }
      } else if (compact_) {
        LoadValues(arena_.row(rows_[i]), dst + i * dim_);
      } else {
        std::memcpy(dst + i * dim_, arena_.row(rows_[i]), dim_ * sizeof(float));
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
  const size_t total = ids.size() * dim_;
  const size_t bad = optim::FindNonFinite(grads, total);
  if (bad == total) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "sparse table '", spec_.name, "': non-finite gradient ", grads[bad], " for id ",
      ids[bad / dim_], " (element ", bad % dim_, ")"));
}

bool SparseTable::MergeDuplicates(std::span<const uint64_t> ids, const float* grads) {
  const size_t n = ids.size();
  if (n < 2) return false;
  const size_t capacity = std::bit_ceil(2 * n);
  const size_t mask = capacity - 1;
  dedup_keys_.resize(capacity);
  dedup_pos_.assign(capacity, RowIndex::kNoRow);
  occurrence_.resize(n);
  unique_ids_.clear();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = ids[i];
    size_t pos = Mix64(id) & mask;
    while (dedup_pos_[pos] != RowIndex::kNoRow && dedup_keys_[pos] != id) pos = (pos + 1) & mask;
    if (dedup_pos_[pos] == RowIndex::kNoRow) {
      dedup_keys_[pos] = id;
      dedup_pos_[pos] = static_cast<uint32_t>(unique_ids_.size());
      unique_ids_.push_back(id);
    }
    occurrence_[i] = dedup_pos_[pos];
  }
  if (unique_ids_.size() == n) return false;
  // Sums in request order, so the result does not depend on hashing.
  merged_.assign(unique_ids_.size() * dim_, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    float* dst = merged_.data() + occurrence_[i] * dim_;
    const float* src = grads + i * dim_;
    for (size_t c = 0; c < dim_; ++c) dst[c] += src[c];
  }
  return true;
}

void SparseTable::ApplyRows(const uint32_t* rows, size_t n, const float* grads, float scale,
                            float lr_scale) {
  optim::UpdateArgs args;
  args.state_stride = dim_;
  args.n = dim_;
  args.scale = scale;
  args.lr_scale = lr_scale;
  for (size_t i = 0; i < n; ++i) {
    const bool on_disk = rows[i] == RowIndex::kNoRow && OnDiskOnly(i);
    if (rows[i] == RowIndex::kNoRow && !on_disk) continue;  // refused by admission
    if (i + kRowPrefetch < n && rows[i + kRowPrefetch] != RowIndex::kNoRow) {
      arena_.Prefetch<true>(rows[i + kRowPrefetch]);
    }
    float* row = on_disk ? DiskRow(i) : arena_.row(rows[i]);
    float* weights = row;
    if (compact_) {
      values_.resize(dim_);
      LoadValues(row, values_.data());
      weights = values_.data();
    }
    args.weights_in = weights;
    args.weights_out = weights;
    args.state = row + value_floats_;
    args.grads = grads + i * dim_;
    if (has_step_) {
      uint32_t step;
      std::memcpy(&step, row + value_floats_ + state_floats_, sizeof(step));
      if (step != UINT32_MAX) ++step;
      std::memcpy(row + value_floats_ + state_floats_, &step, sizeof(step));
      args.step = step;
    }
    optimizer_->Apply(args);
    if (compact_) {
      // Rounding noise from the row and the update's ordinal: reproducible
      // run to run, independent between rows and updates.
      const uint64_t seed = on_disk ? Mix64(Mix64(disk_of_[i] + 1) ^ updates_)
                                    : Mix64(uint64_t{rows[i]} << 32 ^ updates_);
      StoreValues(row, weights, seed, /*stochastic=*/true);
    }
    if (on_disk) {
      // Written back to its slot after the loop: clean, current on disk.
      uint32_t* m = reinterpret_cast<uint32_t*>(row + meta_offset_);
      TouchMeta(m);
      m[1] &= ~kDirty;
    } else if (evicts_) {
      TouchRow(rows[i]);
    }
  }
}

absl::Status SparseTable::Push(std::span<const uint64_t> ids, const float* grads, float scale,
                               float lr_scale, int64_t step) {
  PS_RETURN_IF_ERROR(CheckGradients(ids, grads, scale));
  ++updates_;
  if (evicts_) {
    // With a disk tier the clock counts requests (pulls too): recency of use.
    if (step >= 0 && !tier_) {
      AdvanceClock(static_cast<uint64_t>(step));
    } else {
      ++clock_;
    }
  }
  std::span<const uint64_t> unique = ids;
  const float* unique_grads = grads;
  const bool merged = MergeDuplicates(ids, grads);
  if (merged) {
    unique = unique_ids_;
    unique_grads = merged_.data();
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
    status = sketch_ ? AdmitRows(unique, merged ? ids.size() : 0, rows_.data())
                     : ResolveRows(unique, rows_.data());
    rows = rows_.data();
  }
  if (status.ok()) {
    ApplyRows(rows, unique.size(), unique_grads, scale, lr_scale);
    if (changes_.tracking()) {
      for (size_t i = 0; i < unique.size(); ++i) {
        if (rows[i] != RowIndex::kNoRow || OnDiskOnly(i)) changes_.Changed(unique[i]);
      }
    }
    if (!disk_of_.empty()) status = WriteBackDiskRows(unique);
  }
  // The sweep looks at a few slots per pushed row: a whole pass over the
  // index takes about as many pushes as rows live, whatever the table size.
  if (evicts_) {
    absl::Status after = AfterRequest(4 * unique.size() + 64);
    if (status.ok()) status = after;
  }
  TrimScratch();
  return status;
}

bool SparseTable::AdmitOne(uint64_t id, uint32_t occurrences) {
  const AdmissionConfig& a = spec_.admission;
  const bool coin = a.admit_probability < 1.0f;
  // min_count 1 with a coin: the coin alone decides.
  const uint32_t threshold = a.min_count > 1 ? a.min_count : (coin ? UINT32_MAX : 1);
  for (uint32_t k = 0; k < occurrences; ++k) {
    const uint16_t count = sketch_->Add(id);
    if (count >= threshold) return true;
    // Deterministic per (table, id, occurrence): runs are reproducible.
    if (coin && UnitFloat(Mix64(Mix64(id ^ spec_.id) + count)) < a.admit_probability) return true;
  }
  return false;
}

absl::Status SparseTable::AdmitRows(std::span<const uint64_t> unique, size_t raw_count,
                                    uint32_t* rows) {
  PS_RETURN_IF_ERROR(ResolveRows(unique, rows, /*create=*/false));
  // Occurrences of each unique id in the push (duplicates each count).
  multiplicity_.assign(raw_count > 0 ? unique.size() : 0, 0);
  for (size_t i = 0; i < raw_count; ++i) ++multiplicity_[occurrence_[i]];
  uint64_t refused = 0;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (rows[i] != RowIndex::kNoRow || OnDiskOnly(i)) continue;  // in RAM, or on disk
    if (!AdmitOne(unique[i], raw_count > 0 ? multiplicity_[i] : 1)) {
      ++refused;
      continue;
    }
    if (arena_.size() >= options_.max_rows || arena_.full()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sparse table '", spec_.name, "': cannot create row for id ", unique[i],
                       ", the shard holds its limit of ", options_.max_rows, " rows"));
    }
    rows[i] = CreateRow(unique[i]);
    ++admission_stats_.admitted;
  }
  admission_stats_.refused_ids += refused;
  if (refused > 0) ++admission_stats_.refused_pushes;
  return absl::OkStatus();
}

absl::Status SparseTable::Clear() {
  if (tier_) {
    PS_RETURN_IF_ERROR(tier_->Clear(spec_.id));
    disk_rows_ = 0;
    ram_fresh_ = 0;
  }
  index_.Clear();
  arena_.Clear();
  pull_memo_.Clear();
  FreeVector(rows_);
  FreeVector(unique_ids_);
  FreeVector(merged_);
  FreeVector(occurrence_);
  FreeVector(dedup_keys_);
  FreeVector(dedup_pos_);
  FreeVector(multiplicity_);
  FreeVector(view_values_);
  if (sketch_) sketch_->Clear();
  return absl::OkStatus();
}

void SparseTable::TrimScratch() {
  if (rows_.capacity() > kMaxRetainedIds) FreeVector(rows_);
  if (unique_ids_.capacity() > kMaxRetainedIds) FreeVector(unique_ids_);
  if (occurrence_.capacity() > kMaxRetainedIds) FreeVector(occurrence_);
  if (multiplicity_.capacity() > kMaxRetainedIds) FreeVector(multiplicity_);
  if (merged_.capacity() > kMaxRetainedIds * dim_) FreeVector(merged_);
  if (dedup_keys_.capacity() > 2 * kMaxRetainedIds) {
    FreeVector(dedup_keys_);
    FreeVector(dedup_pos_);
  }
}

size_t SparseTable::ScratchBytes() const {
  return rows_.capacity() * sizeof(uint32_t) + unique_ids_.capacity() * sizeof(uint64_t) +
         merged_.capacity() * sizeof(float) + occurrence_.capacity() * sizeof(uint32_t) +
         dedup_keys_.capacity() * sizeof(uint64_t) + dedup_pos_.capacity() * sizeof(uint32_t) +
         multiplicity_.capacity() * sizeof(uint32_t) + pull_memo_.bytes();
}

MemoryStats SparseTable::memory_stats() const {
  MemoryStats stats;
  stats.rows = arena_.size();
  stats.value_bytes = stats.rows * value_floats_ * sizeof(float);
  stats.state_bytes = stats.rows * (arena_.stride() - value_floats_) * sizeof(float);
  stats.index_bytes = index_.bytes();
  stats.scratch_bytes = ScratchBytes();
  stats.sketch_bytes = sketch_ ? sketch_->bytes() : 0;
  stats.ram_rows = arena_.size();
  stats.disk_rows = disk_rows_;
  if (tier_) stats.rows = size();
  stats.total_bytes = arena_.bytes() + stats.index_bytes + stats.scratch_bytes +
                      stats.sketch_bytes + sizeof(*this);
  return stats;
}

}  // namespace pstrain::server
