// BspAggregator: sums the pushes of every worker for one step so that the
// server applies them once (bulk synchronous parallel). Gradients are summed
// per dense element and per sparse id, together with the number of samples
// they were summed over; Apply() then runs the optimizer once with scale
// 1 / total samples, which equals one worker on the union of the batches.
// Not thread-safe: the server's owner thread uses it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {

class BspAggregator {
 public:
  explicit BspAggregator(KvStore* store);

  // Adds validated push parts from one worker.
  void Add(const std::vector<KvOp>& ops, uint32_t num_samples);
  // Applies the sum (scale 1 / samples) and clears it.
  // `step`: the BSP step being applied (for the tables' warm-up).
  // `samples`: the samples the step's pushes carried in all, when this
  // aggregator sums one part of a split shard (a part sees only the pushes
  // that touch it); 0: the samples added here.
  absl::Status Apply(int64_t step = -1, uint64_t samples = 0);
  uint64_t samples() const { return samples_; }

 private:
  struct DenseSum {
    std::vector<float> sum;  // the shard's whole range
    uint64_t lo = UINT64_MAX, hi = 0;  // touched span, shard coordinates
  };
  struct SparseSum {
    absl::flat_hash_map<uint64_t, uint32_t> row_of;  // id -> row in sum
    std::vector<uint64_t> ids;
    std::vector<float> sum;  // ids.size() x dim
  };

  KvStore* store_;
  std::vector<DenseSum> dense_;    // by table id
  std::vector<SparseSum> sparse_;  // by table id
  uint64_t samples_ = 0;
};

}  // namespace pstrain::server
