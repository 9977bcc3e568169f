// Collective: collective operations among the ranks of a group (the workers
// of an allreduce-mode job, a tensor-parallel group). Implementations: Gloo
// over TCP for host buffers (worker/allreduce/gloo_collective.h) and NCCL
// for GPU buffers (worker/allreduce/nccl_collective_nccl.h).
//
// Calls are blocking and must be made in the same order on every rank. A
// failure (a peer died, the deadline passed) is returned as a Status that
// names the rank(s) at fault when they can be found; after a failure the
// group is unusable. Not thread-safe: one thread issues the calls (see
// CollectiveQueue for running them in the background).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

enum class ReduceOp { kSum, kAverage };

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // data[0, n) <- op over all ranks' data[0, n), in place.
  virtual absl::Status AllReduce(float* data, size_t n, ReduceOp op) = 0;
  // data[0, n) <- root's data[0, n).
  virtual absl::Status Broadcast(float* data, size_t n, int root) = 0;
  virtual absl::Status Barrier() = 0;
};

// Finds the ranks that stopped answering (used to name them in errors).
using PeerProbe = std::function<std::vector<int>()>;

// CollectiveQueue: runs operations on one background thread in submission
// order, so the caller can overlap them with its own work (gradient buckets
// all-reduced while the backward pass goes on). Thread-safe.
class CollectiveQueue {
 public:
  class Handle {
   public:
    // Waits for the operation; its status.
    absl::Status Wait();

   private:
    friend class CollectiveQueue;
    struct State {
      absl::Mutex mu;
      bool done ABSL_GUARDED_BY(mu) = false;
      absl::Status status ABSL_GUARDED_BY(mu);
    };
    std::shared_ptr<State> state_;
  };

  CollectiveQueue();
  ~CollectiveQueue();
  Handle Submit(absl::AnyInvocable<absl::Status()> op);

 private:
  void Run();

  absl::Mutex mu_;
  std::vector<std::pair<absl::AnyInvocable<absl::Status()>, std::shared_ptr<Handle::State>>>
      queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pstrain
