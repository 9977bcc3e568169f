#include "server/ps/tables/eviction_policy.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace pstrain::server {
namespace {

constexpr int kMaxSamples = 16;
static_assert(LruEviction::kSamples <= kMaxSamples && LfuEviction::kSamples <= kMaxSamples);

// The index slot, among `samples` sampled slots of `rows`, of the row whose
// key(metadata) is largest (the first of equals). The samples' index slots,
// then their rows' metadata, are fetched together: a handful of cache
// misses in parallel, not one after another.
template <typename Key>
size_t SampleVictim(const RowStore& rows, int samples, uint64_t* state, Key key) {
  const size_t capacity = rows.slots();
  size_t pos[kMaxSamples];
  uint32_t row[kMaxSamples];
  for (int k = 0; k < samples; ++k) {
    // xorshift64: cheap, deterministic per table.
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    pos[k] = static_cast<size_t>(*state % capacity);
    rows.PrefetchSlot(pos[k]);
  }
  for (int k = 0; k < samples; ++k) {
    uint64_t id;
    while ((row[k] = rows.SlotRow(pos[k], &id)) == RowStore::kNoRow) pos[k] = rows.NextSlot(pos[k]);
    __builtin_prefetch(rows.meta(row[k]));
  }
  size_t best = 0;
  uint64_t best_key = 0;
  for (int k = 0; k < samples; ++k) {
    const uint64_t key_k = key(rows.meta(row[k]));  // larger is a better victim
    if (k == 0 || key_k > best_key) {
      best = pos[k];
      best_key = key_k;
    }
  }
  return best;
}

// The capacity loop of LRU and LFU.
template <typename Pick>
void EvictToCapacity(const RowStore& rows, size_t capacity,
                     absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats,
                     Pick pick) {
  while (rows.size() > capacity) {
    remove(pick());
    ++stats->capacity;
  }
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<EvictionPolicy>>> EvictionPolicy::Create(
    const TableSpec& spec, size_t capacity) {
  const EvictionConfig& e = spec.eviction;
  const std::string what = absl::StrCat("sparse table '", spec.name, "' (id ", spec.id, ")");
  if (e.policy != EvictPolicy::kLru && e.policy != EvictPolicy::kLfu) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown eviction policy ", static_cast<int>(e.policy)));
  }
  if (e.ttl_steps > kMaxTtlSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ttl_steps ", e.ttl_steps, " is above ", kMaxTtlSteps));
  }
  std::vector<std::unique_ptr<EvictionPolicy>> policies;
  const uint64_t seed = Mix64(spec.id + 1) | 1;
  if (e.max_rows > 0) {
    if (e.policy == EvictPolicy::kLfu) {
      policies.push_back(std::make_unique<LfuEviction>(capacity, seed));
    } else {
      policies.push_back(std::make_unique<LruEviction>(capacity, seed));
    }
  }
  if (e.ttl_steps > 0) policies.push_back(std::make_unique<TtlEviction>(e.ttl_steps));
  return policies;
}

LruEviction::LruEviction(size_t capacity, uint64_t seed)
    : capacity_(capacity), sample_state_(seed) {}

size_t LruEviction::PickVictim(const RowStore& rows, uint32_t now) {
  return SampleVictim(rows, kSamples, &sample_state_,
                      [now](const uint32_t* m) { return uint64_t{now - m[0]}; });
}

void LruEviction::Evict(const RowStore& rows, uint32_t now, size_t /*budget*/,
                        absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) {
  EvictToCapacity(rows, capacity_, remove, stats, [&] { return PickVictim(rows, now); });
}

LfuEviction::LfuEviction(size_t capacity, uint64_t seed, int samples)
    : capacity_(capacity), samples_(samples), sample_state_(seed) {}

uint32_t LfuEviction::DecayedCount(uint32_t count, uint32_t age) {
  const uint32_t halvings = age / kLfuHalfLifeSteps;
  return halvings >= 32 ? 0 : count >> halvings;
}

size_t LfuEviction::PickVictim(const RowStore& rows, uint32_t now) {
  return SampleVictim(rows, samples_, &sample_state_, [now](const uint32_t* m) {
    const uint32_t age = now - m[0];
    return (uint64_t{UINT32_MAX - DecayedCount(RowMeta::Count(m), age)} << 32) | age;
  });
}

void LfuEviction::Evict(const RowStore& rows, uint32_t now, size_t /*budget*/,
                        absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) {
  EvictToCapacity(rows, capacity_, remove, stats, [&] { return PickVictim(rows, now); });
}

TtlEviction::TtlEviction(uint64_t ttl_steps) : ttl_(ttl_steps) {}

void TtlEviction::Evict(const RowStore& rows, uint32_t now, size_t budget,
                        absl::FunctionRef<void(size_t slot)> remove, EvictionStats* stats) {
  if (budget == 0) return;
  if (sweep_pos_ >= rows.slots()) sweep_pos_ = 0;  // the index was cleared
  for (size_t n = 0; n < budget && rows.size() > 0; ++n) {
    uint64_t id;
    const uint32_t r = rows.SlotRow(sweep_pos_, &id);
    if (r != RowStore::kNoRow && now - rows.meta(r)[0] > ttl_) {
      remove(sweep_pos_);  // a later entry may move here: look again
      ++stats->ttl;
      continue;
    }
    sweep_pos_ = rows.NextSlot(sweep_pos_);
  }
}

}  // namespace pstrain::server
