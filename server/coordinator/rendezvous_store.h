// RendezvousStore: the coordinator's small key-value store (NCCL unique ids,
// collective rendezvous, evaluation gathers) and its barriers. Requests that
// must wait (a key not set yet, a barrier not full) are parked and answered
// later. Not thread-safe: runs on the coordinator's I/O thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/buffer.h"

namespace pstrain::server {

class RendezvousStore {
 public:
  // Answers a parked request: the value, or no value when the wait ended.
  using GetReply = std::function<void(const Buffer* value)>;
  using BarrierReply = std::function<void(bool complete)>;

  void Set(const std::string& key, Buffer value);
  // Replies now when `key` is set or `deadline` has passed, otherwise parks.
  void Get(const std::string& key, absl::Time deadline, GetReply reply);
  // Counts `member` into barrier `name`; everyone is answered when
  // `participants` distinct members have entered. A completed barrier
  // resets, so the same name can be reused for the next round.
  void EnterBarrier(const std::string& name, const std::string& member, int participants,
                    absl::Time deadline, BarrierReply reply);
  // The members in barrier `name` now (none when it is not open).
  std::vector<std::string> BarrierMembers(const std::string& name) const;
  // Ends parked requests whose deadline passed. Call periodically.
  void Expire(absl::Time now);
  // Ends every barrier now (its members answered as not complete): the
  // cluster rolled back and everyone will enter again.
  void AbortBarriers();
  // Barriers waiting for `from` participants now wait for `to` (< from):
  // a member died. Those already complete are answered.
  void ShrinkBarriers(int from, int to);
  // Barriers waiting for `from` participants now wait for `to` (> from): a
  // dropped member came back and will enter them too.
  void GrowBarriers(int from, int to);
  // Removes `key` (a later Get waits for it again).
  void Erase(const std::string& key) {
    values_.erase(key);
    if (on_change_) on_change_(key, nullptr);
  }
  size_t size() const { return values_.size(); }
  const std::map<std::string, Buffer>& values() const { return values_; }
  // Called after every Set (the value) and Erase (null): the coordinator
  // journals the store.
  void set_on_change(std::function<void(const std::string& key, const Buffer* value)> fn) {
    on_change_ = std::move(fn);
  }

 private:
  struct GetWaiter {
    absl::Time deadline;
    GetReply reply;
  };
  struct Barrier {
    int participants = 0;
    std::map<std::string, std::pair<absl::Time, BarrierReply>> members;
  };

  std::map<std::string, Buffer> values_;
  std::function<void(const std::string&, const Buffer*)> on_change_;
  std::multimap<std::string, GetWaiter> waiters_;
  std::map<std::string, Barrier> barriers_;
};

}  // namespace pstrain::server
