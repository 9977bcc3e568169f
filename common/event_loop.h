// EventLoop: the queue and timers of a process's I/O thread.
//
// The I/O thread owns the sockets; other threads reach it by posting
// closures (Post) which the loop runs in order. Posting to an idle loop
// writes one eventfd; posting to a loop that already has work queued costs
// no system call. Timers run on the loop thread. The transport that embeds
// the loop drives it: it polls wake_fd() beside its sockets, then calls
// RunPending() and RunDueTimers(). Post/RunAfter are thread-safe; the rest
// is for whoever acts as the loop (it requires owner()).
//
// Who may act as the loop (the I/O thread alone, or also an inline runner
// or a guest while it waits) is the business of its LoopOwnership (see
// common/loop_ownership.h): the loop's own state is guarded by it.
#pragma once

#include <atomic>
#include <cstdint>
#include <queue>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/loop_ownership.h"

namespace pstrain {

class EventLoop {
 public:
  // kShared lets other threads act as the loop while the I/O thread waits.
  explicit EventLoop(LoopOwnership::Mode mode = LoopOwnership::Mode::kSingleOwner);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `fn` to run on the loop thread. Thread-safe.
  void Post(absl::AnyInvocable<void()> fn);
  // Runs `fn` on the loop thread once `delay` has passed. Thread-safe.
  void RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn);

  // The file descriptor to poll for readability (posted work is waiting).
  int wake_fd() const { return wake_fd_; }
  // Makes the loop thread's poll of wake_fd() return. Thread-safe.
  void Wake();

  // Who acts as the loop right now; what only the loop may do requires it.
  LoopOwnership& owner() ABSL_LOCK_RETURNED(owner_) { return owner_; }
  const LoopOwnership& owner() const ABSL_LOCK_RETURNED(owner_) { return owner_; }
  // True on the loop thread, and on a thread acting as the loop.
  bool InLoopThread() const { return owner_.InLoop(); }

  // Loop thread only. Clears the wake fd (when `woken`) and runs every
  // closure posted so far. Returns the number run.
  int RunPending(bool woken) ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_);
  // True when closures are queued. Any thread (a hint unless on the loop).
  bool HasPending() const { return has_posted_.load(std::memory_order_acquire); }
  // Loop thread only. Runs due timers.
  void RunDueTimers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_);
  // Loop thread only. Time until the earliest timer (capped at `cap`).
  absl::Duration TimeToNextTimer(absl::Duration cap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_);

 private:
  struct Timer {
    absl::Time when;
    uint64_t seq;
    // mutable: a priority_queue only exposes const tops; the function is
    // moved out just before the entry is popped.
    mutable absl::AnyInvocable<void()> fn;
    bool operator>(const Timer& o) const {
      return when != o.when ? when > o.when : seq > o.seq;
    }
  };

  friend class LoopOwnership;
  void AddTimer(absl::Time when, absl::AnyInvocable<void()> fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_);
  // True when a timer is due before `t`. The holder of owner_ (which
  // cannot name it to the analysis).
  bool HasTimerBefore(absl::Time t) const;

  int wake_fd_ = -1;
  LoopOwnership owner_;
  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(mu_);
  // Mirrors !posted_.empty() for a lock-free check.
  std::atomic<bool> has_posted_{false};
  // Loop state: whoever acts as the loop.
  std::vector<absl::AnyInvocable<void()>> running_ ABSL_GUARDED_BY(owner_);
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_
      ABSL_GUARDED_BY(owner_);
  uint64_t timer_seq_ ABSL_GUARDED_BY(owner_) = 0;
};

}  // namespace pstrain
