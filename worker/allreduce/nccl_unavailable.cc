// Builds without CUDA/NCCL: the NCCL collective cannot be made; callers fall
// back to Gloo (or report the configuration error).
#ifndef PSTRAIN_WITH_CUDA
#include "worker/allreduce/nccl_collective.h"

namespace pstrain::worker {

bool NcclBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions&,
                                                                 RendezvousStore*) {
  return absl::UnavailableError("this build has no CUDA/NCCL (configure with -DPSTRAIN_CUDA=ON)");
}

}  // namespace pstrain::worker
#endif
