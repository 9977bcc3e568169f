// ReplicaGroup: what an allreduce-mode worker keeps beside the parameter
// servers — the collective among the workers, the queue that runs its
// operations in the background, and the dense replica (weights and
// optimizer state) summed through them.
//
// A server failure rolls the whole cluster back to its latest checkpoint.
// The replica rolls back with the embeddings on the servers: Tear() drops
// the group (closing its connections, which also fails an allreduce a peer
// is blocked in with this worker, so every worker leaves its step), and
// Build() after the recovery connects a fresh group under a key prefix of
// the new epoch in the rendezvous store (a stale rank of an older epoch can
// never join it) and starts a fresh replica, which the trainer then restores
// from the checkpoint (Trainer::ResumePosition).
// Owned by the worker loop; not thread-safe (the trainer thread uses it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/collective.h"
#include "common/rendezvous.h"
#include "common/table_spec.h"
#include "model/nn/device.h"
#include "worker/allreduce/dense_replica.h"
#include "worker/allreduce/gloo_collective.h"

namespace pstrain::worker {

struct ReplicaGroupOptions {
  int rank = 0;
  int size = 1;
  std::string hostname = "127.0.0.1";  // Gloo listens here
  bool use_nccl = false;               // GPU model and NCCL built
  GlooOptions::Algorithm gloo_algorithm = GlooOptions::Algorithm::kBcube;
  absl::Duration timeout = absl::Seconds(60);  // the collective's (GlooOptions::timeout)
  PeerProbe probe;
  DenseReplicaOptions replica;  // `staging` is filled in by Build()
};

class ReplicaGroup {
 public:
  // `tables` are the model's tables (the dense ones on_workers are kept);
  // `store` must outlive the group.
  ReplicaGroup(ReplicaGroupOptions options, std::vector<TableSpec> tables, RendezvousStore* store)
      : options_(std::move(options)), tables_(std::move(tables)), store_(store) {}
  ~ReplicaGroup() { Tear(); }

  // Connects the group of cluster epoch `epoch` (every worker calls it with
  // the same epoch) and makes a replica at its initial values, rank 0's on
  // every rank. REQUIRES: no group is built (Tear() first).
  absl::Status Build(uint64_t epoch);
  // Drops the replica, the queue and the collective. Idempotent.
  void Tear();

  bool built() const { return replica_ != nullptr; }
  DenseReplica* replica() const { return replica_.get(); }
  const Collective* collective() const { return collective_.get(); }

 private:
  ReplicaGroupOptions options_;
  std::vector<TableSpec> tables_;
  RendezvousStore* store_;
  std::unique_ptr<nn::Device> staging_;  // NCCL: bucket copies on the GPU
  std::unique_ptr<Collective> collective_;
  std::unique_ptr<CollectiveQueue> queue_;
  std::unique_ptr<DenseReplica> replica_;
};

}  // namespace pstrain::worker
