// PeerBudgets: a bound on the memory that one peer's requests may hold in
// a receiving process. Each request delivered is charged to its sender
// (its reply route) for its bytes until the last Buffer of the message is
// released, however the handler ends with it (replied, dropped, kept
// waiting for a barrier). A request that would take its sender over the
// bound is refused, so a hostile or buggy peer cannot exhaust the process
// while the other peers are still served.
//
// Thread-safety: Charge() on the transport's I/O thread (or its inline
// runner) only; charges are released from any thread (atomic counters).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "common/transport.h"

namespace pstrain {

class PeerBudgets {
 public:
  // `max_bytes` <= 0: no bound (Charge always admits, charges nothing).
  explicit PeerBudgets(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Admits `message` (of `bytes` bytes) from `route` when it fits its
  // sender's budget, or the sender holds nothing, and charges it; false
  // (and `*held` = what the sender holds now) otherwise.
  bool Charge(const std::string& route, int64_t bytes, Message& message, int64_t* held);

  // Bytes that `route`'s live requests hold. Same thread as Charge().
  int64_t Held(const std::string& route) const;

 private:
  struct Account {
    std::atomic<int64_t> bytes{0};
  };
  struct Hold;
  // Forgets the accounts that no live request refers to.
  void Sweep();

  const int64_t max_bytes_;
  absl::flat_hash_map<std::string, std::shared_ptr<Account>> accounts_;
  size_t sweep_at_ = 1024;
};

}  // namespace pstrain
