// The Collective over NCCL, for float buffers in GPU memory: one
// communicator per group, its unique id passed through the RendezvousStore
// (the coordinator), a CUDA stream per communicator. Every call waits with a
// deadline while polling ncclCommGetAsyncError, so a dead peer or a NCCL
// fault becomes a Status (naming the ranks that stopped answering) instead
// of a hang; the communicator is aborted after a failure.
//
// Built only with CUDA (nccl_collective_nccl.cc); without it, Create returns
// Unavailable. This header has no CUDA dependency.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective.h"
#include "common/rendezvous.h"

namespace pstrain::worker {

struct NcclOptions {
  int rank = 0;
  int size = 1;
  int device = 0;                   // CUDA device ordinal of this rank
  std::string prefix = "nccl";      // key namespace in the store
  // Forming the group and each collective call (--collective_timeout): a
  // bucket takes milliseconds, so a minute means a rank is gone or stuck.
  absl::Duration timeout = absl::Seconds(60);
  PeerProbe probe;                  // optional: names dead ranks in errors
};

// Every rank calls it; rank 0 creates the unique id.
absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options,
                                                                 RendezvousStore* store);

// Whether this build has NCCL.
bool NcclBuilt();

}  // namespace pstrain::worker
