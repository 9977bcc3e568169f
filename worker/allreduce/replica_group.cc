#include "worker/allreduce/replica_group.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/allreduce/gloo_collective.h"
#include "worker/allreduce/nccl_collective.h"

namespace pstrain::worker {

absl::Status ReplicaGroup::Build(uint64_t epoch) {
  if (built()) return absl::FailedPreconditionError("the replica group is already built");
  // Epoch 0 keeps the original key names; a rebuilt group meets under keys
  // of its epoch, so it never reads an address of the group it replaces.
  std::string suffix = epoch == 0 ? std::string() : absl::StrCat("/epoch", epoch);
  DenseReplicaOptions ro = options_.replica;
  if (options_.use_nccl) {
    NcclOptions no;
    no.rank = options_.rank;
    no.size = options_.size;
    no.timeout = options_.timeout;
    no.probe = options_.probe;
    no.prefix += suffix;
    if (staging_ == nullptr) {
      PS_ASSIGN_OR_RETURN(staging_, nn::CreateDevice("cuda"));
    }
    PS_ASSIGN_OR_RETURN(collective_, CreateNcclCollective(no, store_));
    ro.staging = staging_.get();
  } else {
    GlooOptions go;
    go.rank = options_.rank;
    go.size = options_.size;
    go.hostname = options_.hostname;
    go.timeout = options_.timeout;
    go.probe = options_.probe;
    go.prefix += suffix;
    go.algorithm = options_.gloo_algorithm;
    PS_ASSIGN_OR_RETURN(auto gloo, GlooCollective::Create(go, store_));
    collective_ = std::move(gloo);
  }
  queue_ = std::make_unique<CollectiveQueue>();
  auto replica = DenseReplica::Create(tables_, ro, collective_.get(), queue_.get());
  if (!replica.ok()) {
    Tear();
    return replica.status();
  }
  replica_ = std::move(*replica);
  if (absl::Status st = replica_->Broadcast(0); !st.ok()) {
    Tear();
    return st;
  }
  return absl::OkStatus();
}

void ReplicaGroup::Tear() {
  // The replica's buckets reference the queue and the collective; the
  // queue finishes what it holds (failing fast once the group is broken)
  // before the collective, whose connections close last.
  replica_.reset();
  queue_.reset();
  collective_.reset();
}

}  // namespace pstrain::worker
