// ConsistencyPolicy: one consistency model's rules on a parameter server
// (DESIGN.md, "One training step"): when a pull may be served, what a push
// does to the workers' clocks, when a BSP step is complete, how a worker
// retires and comes back (elastic workers), and the clocks a restore starts
// from. A worker's clock is the number of pushes it has made; a retired
// worker (finished, or dropped) is no longer waited for.
//
//   AspPolicy     pushes apply on arrival; pulls never wait.
//   BspPolicy     the pushes of all active workers for step t are summed and
//                 applied once (the BspAggregator, in the ShardSet, sums
//                 them); a pull for step t waits until steps < t are
//                 applied.
//   SspPolicy(s)  pushes apply on arrival; a pull at clock c waits until
//                 every active worker has pushed at least c - s times.
//
// The policy decides and the ParameterServer acts: it parks the pulls that
// are not ready and asks again (PullReady) when clocks move, applies or sums
// pushes, and applies a step that CompleteStep() closes. One object per
// table layout, made when the tables are created (Create).
//
// Re-admission (parameter_server_workers.cc has the protocol): a worker
// comes back at a clock every server agrees on. BSP proposes its open step
// (or the next one when somebody pushed it) and completes no step from
// there until the commit (the hold); ASP and SSP restart its clock at the
// slowest active clock, so SSP's slowest clock does not go back.
//
// Not thread-safe: the server's I/O thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

class ConsistencyPolicy {
 public:
  // What a whole push (not a piece of one, KvRequest::partial) carries,
  // for the clocks.
  struct Push {
    int32_t worker = 0;        // REQUIRES: is_worker(worker)
    int64_t clock = 0;         // the clock it was sent at (the header's step)
    bool has_parts = false;    // gradients of some table
    bool has_samples = false;  // num_samples > 0
    bool retire = false;       // the worker's last push: it retires
  };

  // The policy of layout.consistency (an unknown value: ASP) for
  // max(layout.num_workers, 1) workers, every clock at 0.
  static std::unique_ptr<ConsistencyPolicy> Create(const proto::TableLayout& layout);

  virtual ~ConsistencyPolicy() = default;
  ConsistencyPolicy(const ConsistencyPolicy&) = delete;
  ConsistencyPolicy& operator=(const ConsistencyPolicy&) = delete;

  // The workers.
  size_t num_workers() const { return clocks_.size(); }
  bool is_worker(int64_t rank) const {
    return rank >= 0 && rank < static_cast<int64_t>(clocks_.size());
  }
  bool is_retired(int32_t w) const { return retired_[w]; }
  const std::vector<int64_t>& clocks() const { return clocks_; }
  const std::vector<bool>& retired() const { return retired_; }
  // BSP: steps applied; all models: at least the step restored from.
  int64_t applied() const { return applied_; }
  // The server's step for the coordinator: steps applied (BSP), or the
  // newest worker clock.
  virtual int64_t ServerStep() const;

  // Whether a pull at `clock` may be served now.
  virtual bool PullReady(int64_t clock) const = 0;

  // Whether pushes are summed per step and applied when the step completes
  // (BSP), rather than applied on arrival.
  virtual bool sums_pushes() const { return false; }
  // FailedPrecondition when the push may not be taken now (BSP: it is not
  // for the open step); checked before any of it is summed or applied.
  virtual absl::Status CheckPush(const Push& /*push*/) const { return absl::OkStatus(); }
  // Moves the clocks for a whole push: when it arrives (BSP) or once it is
  // applied (ASP, SSP). Returns true when parked pulls may now be ready.
  virtual bool OnPush(const Push& push) = 0;
  // BSP: when every active worker has pushed the open step (and no
  // re-admission of this cluster epoch holds it), closes it and returns it:
  // the server applies the sum. nullopt otherwise (always for ASP, SSP).
  virtual std::optional<int64_t> CompleteStep(uint64_t /*epoch*/) { return std::nullopt; }

  // Elastic workers. Retire: w is no longer waited for. REQUIRES:
  // is_worker(w) for all of these.
  void Retire(int32_t w) { retired_[w] = true; }
  // Forgets a prepared re-admission of w (it was dropped again, or the
  // coordinator cancelled it); true when there was one.
  virtual bool DropReadmission(int32_t /*w*/) { return false; }
  // The clock at which retired worker w could resume on this server (made
  // in cluster epoch `epoch`). REQUIRES: is_retired(w).
  virtual int64_t PrepareReadmission(int32_t w, uint64_t epoch) = 0;
  // Takes w back at `step`, the largest proposal over the servers.
  // BSP: FailedPrecondition, the preparation dropped, when none was made
  // in this epoch or the server is past `step`.
  virtual absl::Status CommitReadmission(int32_t w, int64_t step, uint64_t epoch) = 0;

  // A restore: the workers' clocks and finished flags from the checkpoint
  // (ranks out of range are ignored) and the step it was taken at.
  void Restore(const std::vector<proto::WorkerPosition>& positions, int64_t restored_step);

 protected:
  explicit ConsistencyPolicy(int32_t num_workers);

  // The smallest clock among active workers, or INT64_MAX.
  int64_t SlowestActiveClock() const;
  // ASP and SSP: a push applied moves its worker's clock (unless it only
  // retires it); re-admission at the slowest active clock.
  void OnAppliedPush(const Push& push);
  int64_t ProposeSlowestClock() const;
  void ReadmitAtSlowestClock(int32_t w, int64_t step);

  std::vector<int64_t> clocks_;  // per worker: pushes received
  std::vector<bool> retired_;    // per worker: no longer waited for
  int64_t applied_ = 0;
};

class AspPolicy final : public ConsistencyPolicy {
 public:
  explicit AspPolicy(int32_t num_workers) : ConsistencyPolicy(num_workers) {}

  bool PullReady(int64_t /*clock*/) const override { return true; }
  bool OnPush(const Push& push) override;
  int64_t PrepareReadmission(int32_t /*w*/, uint64_t /*epoch*/) override {
    return ProposeSlowestClock();
  }
  absl::Status CommitReadmission(int32_t w, int64_t step, uint64_t epoch) override;
};

class SspPolicy final : public ConsistencyPolicy {
 public:
  SspPolicy(int32_t num_workers, int64_t staleness)
      : ConsistencyPolicy(num_workers), staleness_(staleness) {}

  bool PullReady(int64_t clock) const override {
    return SlowestActiveClock() >= clock - staleness_;
  }
  bool OnPush(const Push& push) override;
  int64_t PrepareReadmission(int32_t /*w*/, uint64_t /*epoch*/) override {
    return ProposeSlowestClock();
  }
  absl::Status CommitReadmission(int32_t w, int64_t step, uint64_t epoch) override;

 private:
  const int64_t staleness_;
};

class BspPolicy final : public ConsistencyPolicy {
 public:
  explicit BspPolicy(int32_t num_workers) : ConsistencyPolicy(num_workers) {}

  int64_t ServerStep() const override { return applied_; }
  bool PullReady(int64_t clock) const override { return applied_ >= clock; }
  bool sums_pushes() const override { return true; }
  absl::Status CheckPush(const Push& push) const override;
  bool OnPush(const Push& push) override;
  std::optional<int64_t> CompleteStep(uint64_t epoch) override;
  bool DropReadmission(int32_t w) override { return readmissions_.erase(w) > 0; }
  int64_t PrepareReadmission(int32_t w, uint64_t epoch) override;
  absl::Status CommitReadmission(int32_t w, int64_t step, uint64_t epoch) override;

  // A push that counts for its step (its parts and samples are summed, its
  // worker's clock moves): one with gradients or samples, or any push that
  // does not retire.
  static bool Counts(const Push& push) {
    return push.has_parts || push.has_samples || !push.retire;
  }
  // Pushes summed for the open step so far.
  int pushers() const { return pushers_; }

 private:

  struct Readmission {  // prepared, not committed yet
    int64_t hold = 0;    // complete no step >= hold until the commit
    uint64_t epoch = 0;  // the cluster epoch it was made in (a rollback voids it)
  };

  int pushers_ = 0;  // pushes summed for step applied_
  std::map<int32_t, Readmission> readmissions_;  // by worker rank
};

}  // namespace pstrain::server
