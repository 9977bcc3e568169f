#include "server/ps/tables/gradient_merger.h"

#include <bit>

#include "common/hash.h"

namespace pstrain::server {
namespace {

constexpr uint32_t kEmpty = UINT32_MAX;

template <typename T>
void FreeVector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

bool GradientMerger::Merge(std::span<const uint64_t> ids, const float* grads, size_t dim) {
  const size_t n = ids.size();
  if (n < 2) return false;
  const size_t capacity = std::bit_ceil(2 * n);
  const size_t mask = capacity - 1;
  dedup_keys_.resize(capacity);
  dedup_pos_.assign(capacity, kEmpty);
  occurrence_.resize(n);
  unique_ids_.clear();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = ids[i];
    size_t pos = Mix64(id) & mask;
    while (dedup_pos_[pos] != kEmpty && dedup_keys_[pos] != id) pos = (pos + 1) & mask;
    if (dedup_pos_[pos] == kEmpty) {
      dedup_keys_[pos] = id;
      dedup_pos_[pos] = static_cast<uint32_t>(unique_ids_.size());
      unique_ids_.push_back(id);
    }
    occurrence_[i] = dedup_pos_[pos];
  }
  if (unique_ids_.size() == n) return false;
  // Sums in request order, so the result does not depend on hashing.
  merged_.assign(unique_ids_.size() * dim, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    float* dst = merged_.data() + occurrence_[i] * dim;
    const float* src = grads + i * dim;
    for (size_t c = 0; c < dim; ++c) dst[c] += src[c];
  }
  return true;
}

size_t GradientMerger::bytes() const {
  return unique_ids_.capacity() * sizeof(uint64_t) + merged_.capacity() * sizeof(float) +
         occurrence_.capacity() * sizeof(uint32_t) + dedup_keys_.capacity() * sizeof(uint64_t) +
         dedup_pos_.capacity() * sizeof(uint32_t);
}

void GradientMerger::Trim(size_t max_ids, size_t dim) {
  if (unique_ids_.capacity() > max_ids) FreeVector(unique_ids_);
  if (occurrence_.capacity() > max_ids) FreeVector(occurrence_);
  if (merged_.capacity() > max_ids * dim) FreeVector(merged_);
  if (dedup_keys_.capacity() > 2 * max_ids) {
    FreeVector(dedup_keys_);
    FreeVector(dedup_pos_);
  }
}

void GradientMerger::Free() {
  FreeVector(unique_ids_);
  FreeVector(merged_);
  FreeVector(occurrence_);
  FreeVector(dedup_keys_);
  FreeVector(dedup_pos_);
}

}  // namespace pstrain::server
