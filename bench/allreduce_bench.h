// `pstrain_bench allreduce`: W ranks as threads of this process, each with
// its own Gloo TCP context over loopback (they meet through an in-memory
// rendezvous store), all-reducing float buffers of several sizes with
//   - impl "gloo":             gloo::allreduce called directly on the context;
//   - impl "pstrain":          the project's Collective (GlooCollective::AllReduce);
//   - impl "pstrain_bucketed": the allreduce-mode path, DenseReplica: the bytes
//     cut into 8 dense tables, bucketed (--bucket_mb), run on a CollectiveQueue;
//     its time is from the first bucket handed over to the last one summed
//     (the optimizer step that follows is reported apart as step_us).
// The impls alternate, --rounds times each, and the best round is reported:
//   {"bench":"allreduce","impl":I,"workers":W,"ranks":W,"bytes":B,
//    "algbw_gbps":X,"busbw_gbps":Y,"us":T,...}
// with algbw = bytes / time and busbw = algbw * 2(W-1)/W (nccl-tests).
//
// With overlap_steps > 0 it then measures the overlap of the bucketed
// allreduce with the backward pass: every rank trains the deep_tower model
// (dense tables on the ranks) with the buckets started during backward
// (overlap) and only after it (no overlap), alternating:
//   {"bench":"allreduce_overlap","overlap":true|false,"step_ms":..,
//    "compute_ms":..,"comm_wait_ms":..,...} and a summary line with the
// fraction of the allreduce time hidden behind compute.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::bench {

struct AllreduceBenchOptions {
  int ranks = 2;
  std::vector<size_t> bytes = {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20,
                               size_t{16} << 20, size_t{64} << 20};
  double seconds = 1.0;  // per (size, impl, round)
  int rounds = 3;
  size_t bucket_bytes = size_t{25} << 20;
  // Overlap part (0 steps: skipped).
  int overlap_steps = 0;
  int overlap_rounds = 3;
  int tower_layers = 12;
  int tower_width = 1024;
  int batch_size = 256;
};

// Prints result lines on stdout; the first error otherwise.
absl::Status RunAllreduceBench(const AllreduceBenchOptions& options);

}  // namespace pstrain::bench
