#include "common/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace pstrain {

EventLoop::EventLoop(LoopOwnership::Mode mode) : owner_(this, mode) {
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
  if (InLoopThread()) {
    owner_.AssertHeld();
    AddTimer(when, std::move(fn));
  } else {
    Post([this, when, f = std::move(fn)]() mutable {
      owner_.AssertHeld();  // posted closures run as the loop
      AddTimer(when, std::move(f));
    });
  }
}

void EventLoop::AddTimer(absl::Time when, absl::AnyInvocable<void()> fn) {
  timers_.push(Timer{when, timer_seq_++, std::move(fn)});
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

bool EventLoop::HasTimerBefore(absl::Time t) const {
  owner_.AssertHeld();
  return !timers_.empty() && timers_.top().when < t;
}

}  // namespace pstrain
