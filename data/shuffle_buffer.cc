#include "data/shuffle_buffer.h"

#include <algorithm>
#include <cstring>

#include "common/hash.h"

namespace pstrain::worker {

ShuffleBuffer::ShuffleBuffer(size_t capacity, int num_dense, int num_sparse, bool single_hot,
                             int num_extra_labels)
    : capacity_(capacity),
      num_dense_(num_dense),
      num_sparse_(num_sparse),
      single_hot_(single_hot),
      num_labels_(1 + num_extra_labels),
      labels_(capacity * num_labels_),
      dense_(capacity * num_dense) {
  if (single_hot_) {
    flat_ids_.resize(capacity * num_sparse);
    iota_ends_.resize(num_sparse);
    for (int f = 0; f < num_sparse; ++f) iota_ends_[f] = static_cast<uint32_t>(f + 1);
  } else {
    ids_.resize(capacity);
    ends_.resize(capacity * num_sparse);
  }
}

void ShuffleBuffer::Reseed(uint64_t seed) { rng_state_ = Mix64(seed ^ 0x5348554646ULL); }

uint64_t ShuffleBuffer::NextRandom() {
  rng_state_ += 0x9e3779b97f4a7c15ULL;
  return Mix64(rng_state_);
}

void ShuffleBuffer::Insert(const ParsedRow& row) {
  const size_t s = size_++;
  float* labels = labels_.data() + s * num_labels_;
  labels[0] = row.label;
  std::copy_n(row.extra_labels.data(), num_labels_ - 1, labels + 1);
  std::copy_n(row.dense.data(), num_dense_, dense_.data() + s * num_dense_);
  if (single_hot_) {
    std::copy_n(row.ids.data(), num_sparse_, flat_ids_.data() + s * num_sparse_);
  } else {
    ids_[s].assign(row.ids.begin(), row.ids.end());
    std::copy_n(row.field_end.data(), num_sparse_, ends_.data() + s * num_sparse_);
  }
}

void ShuffleBuffer::MoveSlot(size_t from, size_t to) {
  std::copy_n(labels_.data() + from * num_labels_, num_labels_, labels_.data() + to * num_labels_);
  std::copy_n(dense_.data() + from * num_dense_, num_dense_, dense_.data() + to * num_dense_);
  if (single_hot_) {
    std::copy_n(flat_ids_.data() + from * num_sparse_, num_sparse_,
                flat_ids_.data() + to * num_sparse_);
  } else {
    ids_[to].swap(ids_[from]);
    std::copy_n(ends_.data() + from * num_sparse_, num_sparse_, ends_.data() + to * num_sparse_);
  }
}

bool ShuffleBuffer::PopRandomInto(BatchBuilder* out) {
  // Multiply-shift maps 64 random bits to [0, size_) without division.
  const size_t j = static_cast<size_t>(
      (static_cast<unsigned __int128>(NextRandom()) * size_) >> 64);
  const float* dense = dense_.data() + j * num_dense_;
  const float* labels = labels_.data() + j * num_labels_;
  bool ok = single_hot_
                ? out->Append(labels[0], dense, flat_ids_.data() + j * num_sparse_,
                              iota_ends_.data(), labels + 1)
                : out->Append(labels[0], dense, ids_[j].data(), ends_.data() + j * num_sparse_,
                              labels + 1);
  if (!ok) return false;
  if (j != size_ - 1) MoveSlot(size_ - 1, j);
  --size_;
  return true;
}

}  // namespace pstrain::worker
