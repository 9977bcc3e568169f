// CoordinatorClient: how a server, worker or tool talks to the coordinator:
// registration (with retry and backoff until a deadline, so processes may
// start in any order), the cluster view, table layout, barriers, the
// rendezvous store, heartbeats and the end of a worker's work.
//
// Losing the coordinator (with reconnect_timeout > 0): once heartbeats go
// unanswered for lost_after (or a coordinator answers that it does not know
// this node: a restarted one), the coordinator is lost. The node keeps its
// state; the calls waiting on the old coordinator fail at once and wait; the
// heartbeat loop registers again with the same rank and `resume` set, with
// backoff, until a coordinator takes the node back (one that journals the
// job, coordinator_resume.cc); then the waiting calls are re-issued and go
// on. When none does within reconnect_timeout, or a coordinator refuses the
// node, the client gives up: every call fails with the reason and
// on_gave_up runs.
//
// Thread-safe: calls may come from any thread; heartbeats run on the RPC
// node's I/O thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain {

// The coordinator's answer to a node with nothing left to do: the job has
// finished, or goes on without it (a worker that is not re-admitted). A node
// told so at registration exits 0, naming why, so that a restart policy
// (docker's on-failure) leaves it stopped. OutOfRange: no other answer to a
// registration carries that code.
absl::Status NothingLeftToDo(absl::string_view why);
bool IsNothingLeftToDo(const absl::Status& status);

struct CoordinatorClientOptions {
  std::string coordinator;      // endpoint, e.g. tcp://10.0.0.1:7000
  proto::Role role = proto::Role::kWorker;
  int32_t requested_rank = -1;  // -1: the coordinator assigns one
  std::string endpoint;         // this node's advertised receive endpoint
  // How long Register() keeps retrying while the coordinator is unreachable.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Deadline of ordinary calls.
  absl::Duration call_timeout = absl::Seconds(30);
  // How long CheckpointArrive waits for the checkpoint to be written (every
  // server writes its shard first: minutes for a big model).
  absl::Duration checkpoint_timeout = absl::Hours(1);
  // How much longer than its `wait` a WaitForRecovery may take: a recovery
  // under way holds every waiter until it ends, which may take as long as a
  // replacement server needs to start (at least the coordinator's
  // --recovery_timeout).
  absl::Duration recovery_timeout = absl::Hours(1);
  // A stable identity of this node (--node_id): the coordinator gives it
  // the same rank whenever it registers. Empty: none.
  std::string node_id;
  // How long a lost coordinator is waited for (see above); zero: never
  // reconnect (a call that gets no answer fails).
  absl::Duration reconnect_timeout = absl::ZeroDuration();
  // No heartbeat answered for this long: the coordinator is lost (zero:
  // ten heartbeat intervals, at least 2 s).
  absl::Duration lost_after = absl::ZeroDuration();
  // The client gave up on a lost coordinator (I/O thread; optional).
  std::function<void(const absl::Status&)> on_gave_up;
};

class CoordinatorClient {
 public:
  // `node` must be started and outlive this client.
  CoordinatorClient(RpcNode* node, CoordinatorClientOptions options);
  ~CoordinatorClient();

  // Registers (retrying with backoff) and returns the first cluster view,
  // which carries this node's rank.
  absl::StatusOr<proto::ClusterView> Register();
  // Waits until every expected node has joined; returns the full view.
  absl::StatusOr<proto::ClusterView> WaitForCluster(absl::Duration timeout);
  // Submits the model's tables; returns the layout once the servers hold
  // them. Every worker may call it; definitions must agree.
  absl::StatusOr<proto::TableLayout> DefineTables(const std::vector<TableSpec>& tables,
                                                  absl::Duration timeout);
  // Enters barrier `name` and waits until `participants` members have
  // entered, at most `timeout` (the coordinator keeps the entry as long);
  // DeadlineExceeded names the members still missing and what the
  // coordinator last heard of them.
  absl::Status Barrier(const std::string& name, int participants, absl::Duration timeout);
  // A barrier wait that is never silent: it waits in slices of a second,
  // runs `between` (may be null; its error ends the wait) after each, and
  // logs `what` the wait is for with who has not arrived after 5 s, then
  // at doubling intervals up to a minute. Fails after `timeout`, naming
  // the members still missing.
  absl::Status WaitAtBarrier(const std::string& name, int participants, absl::Duration timeout,
                             const std::string& what,
                             const std::function<absl::Status()>& between = nullptr);
  absl::Status StoreSet(const std::string& key, Buffer value);
  // Waits up to `wait` for the key to appear; NotFound / DeadlineExceeded.
  absl::StatusOr<Buffer> StoreGet(const std::string& key, absl::Duration wait);
  // Tells the coordinator this worker has finished.
  absl::Status WorkerDone();
  // Reports this worker paused for checkpoint `step` (or, with
  // position.finished, done training) and waits until the checkpoint is
  // written. `state` (optional) is worker-held state to store with it.
  absl::StatusOr<proto::CheckpointDone> CheckpointArrive(int64_t step,
                                                         const proto::WorkerPosition& position,
                                                         Buffer state = Buffer());

  // Sends a heartbeat every `interval` until Stop; `fill` supplies its body.
  // After an error at cluster epoch `epoch`: waits up to `wait` for a
  // recovery to begin and then for it to end. The new epoch, servers and
  // layout, or Unavailable when no recovery is under way.
  absl::StatusOr<proto::Recovered> WaitForRecovery(uint64_t epoch, absl::Duration wait);
  // Elastic workers: the rest of a dead worker's shard to train, or rank -1.
  absl::StatusOr<proto::ShardClaim> ClaimShard();
  // Elastic workers: whether this worker returns after it was dropped, and
  // from where it trains (blocks while the servers take it back).
  absl::StatusOr<proto::Rejoin> Rejoin();
  void StartHeartbeats(absl::Duration interval, std::function<proto::Heartbeat()> fill);
  void StopHeartbeats();

  // When the coordinator last answered a heartbeat (or registration).
  absl::Time last_contact() const { return absl::FromUnixNanos(last_contact_ns_.load()); }
  // OK while the coordinator is there; Unavailable (saying since when)
  // while it is lost; the reason once the client gave up.
  absl::Status CoordinatorStatus() const;
  bool gave_up() const { return gave_up_.load(); }
  // Whether the coordinator journals the job (a restarted one can take it back).
  bool journaled() const { return journaled_.load(); }

  int32_t rank() const { return rank_.load(); }
  uint64_t epoch() const { return epoch_.load(); }
  PeerId peer() const { return peer_; }

  // A header from this node with `type`.
  proto::Header MakeHeader(proto::MsgType type) const;

 private:
  // One call; with reconnect_timeout, re-issued (`make` builds it again)
  // when the coordinator was lost meanwhile and a coordinator took this node
  // back.
  absl::StatusOr<proto::Decoded> CallDecoded(const std::function<Message()>& make,
                                             absl::Duration timeout, absl::string_view what);
  proto::RegisterRequest RegisterBody(bool resume) const;
  void HeartbeatTick(absl::Duration interval);
  // I/O thread: the coordinator is lost (`why`), a registration again, the end.
  void OnLost(const std::string& why);
  void Reregister(absl::Duration interval);
  void GiveUp(absl::Status why);
  absl::Duration LostAfter(absl::Duration interval) const;

  RpcNode* node_;
  CoordinatorClientOptions options_;
  PeerId peer_;
  std::atomic<int32_t> rank_{-1};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> heartbeating_{false};
  std::atomic<int64_t> last_contact_ns_{absl::ToUnixNanos(absl::Now())};
  // The client's life as the I/O thread's callbacks see it: they run only
  // while it lives, and the destructor waits for one that is running
  // (coordinator_client.cc, RunIfAlive).
  struct Life;
  std::shared_ptr<Life> life_;
  std::function<proto::Heartbeat()> fill_;

  // Losing the coordinator (I/O thread writes; any thread reads).
  std::atomic<bool> journaled_{false};
  std::atomic<bool> done_reported_{false};  // WorkerDone() was called
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> lost_since_ns_{0};
  std::atomic<uint64_t> registrations_{0};  // bumped by each registration again
  std::atomic<bool> gave_up_{false};
  bool reregistering_ = false;  // I/O thread: a registration in flight
  absl::Time next_register_;    // I/O thread
  absl::Duration register_backoff_;
  mutable absl::Mutex mu_;
  absl::Status give_up_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
