// The disk tier bench (`pstrain_bench sparse_tier`): one server's shard of a
// sparse table larger than its memory budget, in process (the table, no
// network: what the tier costs the table itself). The table is trained
// once over all --rows ids (one push each, through the optimizer), with a
// budget that keeps --ram_fraction of its rows in RAM; the resident memory
// and the tier's disk bytes are reported; it is checkpointed and restored
// into a fresh tiered shard whose rows must be identical (a digest of every
// row's id, values, state and step); then the same table with every row in
// RAM is built and Zipf(--zipf) pulls of --ids ids are timed on both,
// alternating, --rounds windows of --seconds each. One JSON line per phase
// and a summary: tiered pull rows/s over all-in-RAM rows/s, the RAM hit
// rate, whether the rows restored identical.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/table_spec.h"

namespace pstrain::bench {

struct TierBenchOptions {
  uint64_t rows = 16'000'000;
  uint32_t dim = 64;
  OptimizerKind optimizer = OptimizerKind::kRowwiseAdagrad;
  double ram_fraction = 0.1;
  double zipf = 1.1;
  int ids = 4096;           // ids per pull
  double seconds = 5;       // per timed window
  int rounds = 3;           // windows per table, alternating
  std::string dir;          // tier and checkpoint folder (default: under /tmp)
  std::string store = "slots";  // slots | rocksdb
};

absl::Status RunTierBench(const TierBenchOptions& options);

}  // namespace pstrain::bench
