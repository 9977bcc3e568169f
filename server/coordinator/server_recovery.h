// ServerRecovery: the coordinator's part of recovering from a server
// failure: whether a recovery is under way and why, when it began, whether
// the servers are restoring, and the workers waiting for its end.
//
// With checkpoints on, a failed server does not end the job. The coordinator
// bumps the cluster's epoch and sends kRecover to every live node: servers
// drop their tables and fail their waiting pulls, workers stop talking to
// servers. When a replacement registers with the failed server's rank (or
// the same process is heard from again, e.g. after SIGSTOP/SIGCONT), every
// server is given the tables again, restored from the latest checkpoint, so
// the model is one consistent cut; the workers, waiting in kWaitRecovery,
// get the new layout (epoch, restored step, data positions) and the new
// server addresses, and resume from the checkpoint. Pulls and pushes carry
// the epoch, so a request sent before the rollback never touches the
// restored tables. At most the steps since the last checkpoint are redone.
// In allreduce mode the workers' dense replicas roll back too: each worker
// drops its collective group on the failure, rebuilds it under the new
// epoch and restores its replica from the same checkpoint
// (worker/allreduce/replica_group.h). In pipeline mode every stage leaves its step
// (its waits on its neighbours fail on kRecover), rebuilds its stage links
// and tensor-parallel group under the new epoch and resumes from the same
// checkpoint (worker/pipeline/pipeline_worker.cc).
//
// The core drives a recovery, since it owns the epoch, the membership and
// the layout: Begin on a failure, StartRestore once every server is up,
// Restored when they have the tables again. This part keeps the state
// between those calls and answers the workers waiting in kWaitRecovery.
// Owned by the Coordinator. Not thread-safe: the coordinator's I/O thread
// only; answers go out through the ClusterLink, which outlives it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto_msgs/messages.h"
#include "server/coordinator/cluster_link.h"

namespace pstrain::server {

class ServerRecovery {
 public:
  // `timeout`: how long a failed server may take to come back.
  ServerRecovery(absl::Duration timeout, ClusterLink* link) : timeout_(timeout), link_(link) {}
  ServerRecovery(const ServerRecovery&) = delete;
  ServerRecovery& operator=(const ServerRecovery&) = delete;

  // From a server failure until every server has restored the tables.
  bool active() const { return recovering_; }
  // Every server is up and the servers are restoring the checkpoint.
  bool restoring() const { return restoring_; }
  // Why the latest recovery began (for errors that end it).
  const std::string& reason() const { return reason_; }

  // A server failed (`reason`): the cluster now waits for it under the new
  // epoch. A failure during a recovery restarts the wait, not the clock.
  void Begin(const std::string& reason);
  void StartRestore() { restoring_ = true; }
  // The servers could not restore (the job ends).
  void RestoreFailed() { restoring_ = false; }
  // The servers restored the tables: the recovery is over and the waiting
  // workers get `recovered`.
  void Restored(const proto::Recovered& recovered);
  // The error that ends the job once a failed server has not come back
  // within the timeout; OK otherwise.
  absl::Status CheckTimeout(absl::Time now) const;

  // kWaitRecovery: `waiter` is answered when the recovery under way ends,
  // or, when none is, Unavailable once `wait` (at most kMaxWait) passed.
  void Park(Parked waiter, absl::Duration wait);
  // Answers the waiters whose wait passed while no recovery is under way.
  void Expire(absl::Time now);

 private:
  struct Waiter {
    Parked to;
    absl::Time deadline;
  };

  const absl::Duration timeout_;
  ClusterLink* const link_;

  bool recovering_ = false;
  bool restoring_ = false;  // the recovery's table creation in flight
  std::string reason_;
  absl::Time started_;
  std::vector<Waiter> waiters_;
};

}  // namespace pstrain::server
