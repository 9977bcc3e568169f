#include "common/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace pstrain {

thread_local const EventLoop* EventLoop::inline_loop_ = nullptr;

EventLoop::EventLoop() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    std::perror("pstrain: eventfd");
    std::abort();  // no file descriptors left: nothing sensible to do
  }
}

EventLoop::~EventLoop() { close(wake_fd_); }

void EventLoop::Wake() {
  uint64_t one = 1;
  ssize_t n;
  do {
    n = write(wake_fd_, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void EventLoop::Post(absl::AnyInvocable<void()> fn) {
  bool was_empty;
  {
    absl::MutexLock lock(&mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
    has_posted_.store(true, std::memory_order_release);
  }
  if (was_empty) Wake();
}

void EventLoop::RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) {
  absl::Time when = absl::Now() + delay;
  auto add = [this, when, f = std::move(fn)]() mutable {
    timers_.push(Timer{when, timer_seq_++, std::move(f)});
  };
  if (InLoopThread()) {
    add();
  } else {
    Post(std::move(add));
  }
}

int EventLoop::RunPending(bool woken) {
  if (woken) {
    uint64_t value;
    ssize_t n;
    do {
      n = read(wake_fd_, &value, sizeof(value));
    } while (n < 0 && errno == EINTR);
  }
  if (!has_posted_.load(std::memory_order_acquire)) return 0;
  {
    absl::MutexLock lock(&mu_);
    if (posted_.empty()) return 0;
    running_.swap(posted_);
    has_posted_.store(false, std::memory_order_relaxed);
  }
  int count = static_cast<int>(running_.size());
  for (auto& fn : running_) fn();
  running_.clear();
  return count;
}

bool EventLoop::HasPending() { return has_posted_.load(std::memory_order_acquire); }

void EventLoop::RunDueTimers() {
  if (timers_.empty()) return;
  absl::Time now = absl::Now();
  while (!timers_.empty() && timers_.top().when <= now) {
    absl::AnyInvocable<void()> fn = std::move(timers_.top().fn);
    timers_.pop();
    fn();
  }
}

absl::Duration EventLoop::TimeToNextTimer(absl::Duration cap) {
  if (timers_.empty()) return cap;
  absl::Duration d = timers_.top().when - absl::Now();
  if (d < absl::ZeroDuration()) return absl::ZeroDuration();
  return d < cap ? d : cap;
}

void EventLoop::BeginWork() {
  work_mu_.lock();
  waiting_ = false;
}

void EventLoop::EndWork(absl::Time until) {
  waiting_ = true;
  wait_until_ = until;
  work_mu_.unlock();
}

void EventLoop::StopWork() {
  waiting_ = false;
  work_mu_.unlock();
}

bool EventLoop::TryRunInline(absl::FunctionRef<void()> fn) {
  if (has_posted_.load(std::memory_order_acquire)) return false;  // keep the order
  if (!work_mu_.try_lock()) return false;
  std::lock_guard<std::mutex> lock(work_mu_, std::adopt_lock);
  if (!waiting_) return false;
  {
    // A closure posted meanwhile must run first.
    absl::MutexLock q(&mu_);
    if (!posted_.empty()) return false;
  }
  inline_loop_ = this;
  fn();
  inline_loop_ = nullptr;
  if (!timers_.empty() && timers_.top().when < wait_until_) Wake();
  return true;
}

}  // namespace pstrain

namespace pstrain {

bool EventLoop::TryEnterGuest() {
  if (has_posted_.load(std::memory_order_acquire)) return false;
  if (!work_mu_.try_lock()) return false;
  if (!waiting_) {
    work_mu_.unlock();
    return false;
  }
  inline_loop_ = this;
  return true;
}

void EventLoop::PauseGuest() {
  inline_loop_ = nullptr;
  // A timer the guest added may be due before the loop thread's wait ends.
  if (!timers_.empty() && timers_.top().when < wait_until_) Wake();
  work_mu_.unlock();
}

bool EventLoop::ResumeGuest() {
  work_mu_.lock();
  inline_loop_ = this;
  return waiting_;
}

void EventLoop::LeaveGuest() {
  inline_loop_ = nullptr;
  if (!timers_.empty() && timers_.top().when < wait_until_) Wake();
  work_mu_.unlock();
}

}  // namespace pstrain
