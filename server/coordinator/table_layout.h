// Placement of tables on servers (computed once by the coordinator).
//
// A dense table no larger than `chunk_floats` lives whole on the server with
// the fewest floats so far; a larger one is cut into num_servers contiguous
// ranges of (nearly) equal length, one per server, so that no server is the
// hot spot of a big tensor. Sparse rows are placed by hash
// (SparseOwner), not listed.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/hash.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

// Checks names, ids (== position), kinds, sizes and dims of `tables`.
absl::Status ValidateTableSpecs(const std::vector<TableSpec>& tables);

absl::StatusOr<proto::TableLayout> ComputeLayout(const std::vector<TableSpec>& tables,
                                                 int num_servers, uint64_t chunk_floats);

// Whether two table lists define the same job (same ids, names, shapes,
// optimizers and initializers).
bool SameTables(const std::vector<TableSpec>& a, const std::vector<TableSpec>& b);

}  // namespace pstrain::server
