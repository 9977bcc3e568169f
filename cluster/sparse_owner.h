// Which server owns a sparse row: Mix64(id) mod num_servers. Shared by the
// client (to route ids) and the servers (to refuse ids they do not own).
// Within a server, SparseOwnerPart picks the executor thread that owns the
// row (--server_threads) from the same hash's quotient, so the rows of one
// server spread evenly over its threads whatever the number of servers.
#pragma once

#include <cstdint>

#include "common/hash.h"

namespace pstrain {

inline int SparseOwner(uint64_t id, int num_servers) {
  // Mix again: folded ids (id % buckets) are small and clustered.
  return static_cast<int>(Mix64(id ^ 0x5bd1e9955bd1e995ULL) % static_cast<uint64_t>(num_servers));
}

inline int SparseOwnerPart(uint64_t id, int num_servers, int parts) {
  const uint64_t h = Mix64(id ^ 0x5bd1e9955bd1e995ULL) / static_cast<uint64_t>(num_servers);
  return static_cast<int>(h % static_cast<uint64_t>(parts));
}

}  // namespace pstrain
