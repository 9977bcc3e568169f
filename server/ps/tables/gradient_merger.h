// GradientMerger: the distinct ids of a push and, where an id occurs more
// than once, the sum of its gradients, so that a SparseTable runs the
// optimizer once per row. The sums follow request order, so the result does
// not depend on hashing. A small open-addressing set sized per push finds
// the duplicates; its buffers are kept between pushes (Trim frees those a
// large push grew).
//
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pstrain::server {

class GradientMerger {
 public:
  // Finds the distinct ids of `ids` (gradients: dim floats each in grads).
  // Returns true when some id occurs more than once: unique() and sums()
  // then hold the distinct ids, in order of first occurrence, and their
  // summed gradients. False when every id occurs once (nothing is summed).
  bool Merge(std::span<const uint64_t> ids, const float* grads, size_t dim);

  // After a Merge that returned true.
  std::span<const uint64_t> unique() const { return unique_ids_; }
  const float* sums() const { return merged_.data(); }
  // After a Merge of n >= 2 ids: the position in unique() of ids[i].
  uint32_t occurrence(size_t i) const { return occurrence_[i]; }

  // Bytes of the buffers kept.
  size_t bytes() const;
  // Frees the buffers grown past `max_ids` ids (of dim floats).
  void Trim(size_t max_ids, size_t dim);
  // Frees every buffer.
  void Free();

 private:
  std::vector<uint64_t> unique_ids_;
  std::vector<float> merged_;
  std::vector<uint32_t> occurrence_;  // position in unique_ids_ of each id
  std::vector<uint64_t> dedup_keys_;
  std::vector<uint32_t> dedup_pos_;
};

}  // namespace pstrain::server
