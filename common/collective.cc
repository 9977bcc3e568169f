#include "common/collective.h"

namespace pstrain {

absl::Status CollectiveQueue::Handle::Wait() {
  if (!state_) return absl::FailedPreconditionError("empty collective handle");
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(&state_->done));
  return state_->status;
}

CollectiveQueue::CollectiveQueue() : thread_([this] { Run(); }) {}

CollectiveQueue::~CollectiveQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

CollectiveQueue::Handle CollectiveQueue::Submit(absl::AnyInvocable<absl::Status()> op) {
  Handle h;
  h.state_ = std::make_shared<Handle::State>();
  absl::MutexLock lock(&mu_);
  queue_.emplace_back(std::move(op), h.state_);
  return h;
}

void CollectiveQueue::Run() {
  while (true) {
    std::pair<absl::AnyInvocable<absl::Status()>, std::shared_ptr<Handle::State>> item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      item = std::move(queue_.front());
      queue_.erase(queue_.begin());
    }
    absl::Status st = item.first();
    absl::MutexLock lock(&item.second->mu);
    item.second->status = st;
    item.second->done = true;
  }
}

}  // namespace pstrain
