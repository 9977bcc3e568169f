// The --auth and --keys_dir flags, shared by every binary that opens a
// ZmqTransport (pstrain_coordinator, pstrain_server, pstrain_worker,
// pstrain train). Defined here, once, rather than next to each main(): the
// binaries must agree on them, and `pstrain local` passes them to all of its
// children. Only main() calls this (libraries never read flags).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/transport.h"

namespace pstrain {

// The transport's CURVE settings from --auth and --keys_dir (see
// CurveKeysForAuth); empty CurveKeys for --auth=none. Call after parsing
// the flags.
absl::StatusOr<CurveKeys> CurveKeysFromFlags();

}  // namespace pstrain
