#include "server/coordinator/server_recovery.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace pstrain::server {

namespace {
// The longest a kWaitRecovery is parked when no recovery is under way: the
// worker asks again, so it keeps checking its own deadline.
constexpr absl::Duration kMaxWait = absl::Minutes(10);
}  // namespace

void ServerRecovery::Begin(const std::string& reason) {
  reason_ = reason;
  if (!recovering_) started_ = absl::Now();
  recovering_ = true;
  restoring_ = false;
  spdlog::warn("{}: the cluster rolls back to the latest checkpoint (epoch {}) once it is back; "
               "waiting up to {} for it", reason, link_->epoch(), absl::FormatDuration(timeout_));
}

void ServerRecovery::Restored(const proto::Recovered& recovered) {
  restoring_ = false;
  recovering_ = false;
  spdlog::info("recovered in {:.1f}s: workers resume from step {} (epoch {})",
               absl::ToDoubleSeconds(absl::Now() - started_),
               std::max<int64_t>(0, recovered.layout.restored_step), recovered.epoch);
  for (const Waiter& w : waiters_) {
    link_->node().Reply(w.to.route, w.to.id, CoordinatorReply(recovered));
  }
  waiters_.clear();
}

absl::Status ServerRecovery::CheckTimeout(absl::Time now) const {
  if (!recovering_ || now - started_ <= timeout_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(reason_, "; it did not come back within ",
                                             absl::FormatDuration(timeout_)));
}

void ServerRecovery::Park(Parked waiter, absl::Duration wait) {
  wait = std::clamp(wait, absl::ZeroDuration(), kMaxWait);
  waiters_.push_back({std::move(waiter), absl::Now() + wait});
  Expire(absl::Now());
}

void ServerRecovery::Expire(absl::Time now) {
  if (recovering_) return;  // all wait for its end (bounded by the timeout)
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    link_->node().Reply(it->to.route, it->to.id,
                        CoordinatorError(absl::UnavailableError("no recovery under way")));
    it = waiters_.erase(it);
  }
}

}  // namespace pstrain::server
