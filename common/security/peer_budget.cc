#include "common/security/peer_budget.h"

#include <algorithm>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace pstrain {

// Shared by every Buffer of one charged message: keeps the original owners
// alive and gives the bytes back when the last Buffer goes.
struct PeerBudgets::Hold {
  std::shared_ptr<Account> account;
  int64_t bytes = 0;
  absl::InlinedVector<std::shared_ptr<const void>, 4> owners;
  ~Hold() { account->bytes.fetch_sub(bytes, std::memory_order_relaxed); }
};

bool PeerBudgets::Charge(const std::string& route, int64_t bytes, Message& message,
                         int64_t* held) {
  if (max_bytes_ <= 0) return true;
  std::shared_ptr<Account>& slot = accounts_[route];
  if (!slot) slot = std::make_shared<Account>();
  int64_t now = slot->bytes.load(std::memory_order_relaxed);
  // A peer holding nothing gets any one message (its size is bounded
  // elsewhere): a big but valid request is never refused for good.
  if (now > 0 && now + bytes > max_bytes_) {
    *held = now;
    return false;
  }
  slot->bytes.fetch_add(bytes, std::memory_order_relaxed);
  auto hold = std::make_shared<Hold>();
  hold->account = slot;
  hold->bytes = bytes;
  auto rewrap = [&hold](Buffer& b) {
    if (b.owner() != nullptr) hold->owners.push_back(b.owner());
    b = Buffer(b.data(), b.size(), hold);
  };
  rewrap(message.header);
  for (Buffer& p : message.payloads) rewrap(p);
  if (accounts_.size() >= sweep_at_) Sweep();
  return true;
}

int64_t PeerBudgets::Held(const std::string& route) const {
  auto it = accounts_.find(route);
  return it == accounts_.end() ? 0 : it->second->bytes.load(std::memory_order_relaxed);
}

void PeerBudgets::Sweep() {
  std::vector<std::string> idle;
  for (const auto& [route, account] : accounts_) {
    if (account.use_count() == 1) idle.push_back(route);
  }
  for (const std::string& r : idle) accounts_.erase(r);
  sweep_at_ = std::max<size_t>(1024, 2 * accounts_.size());
}

}  // namespace pstrain
