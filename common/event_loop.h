// EventLoop: the queue and timers of a process's I/O thread.
//
// The I/O thread owns the sockets; other threads reach it by posting
// closures (Post) which the loop runs in order. Posting to an idle loop
// writes one eventfd; posting to a loop that already has work queued costs
// no system call. Timers run on the loop thread. The transport that embeds
// the loop drives it: it polls wake_fd() beside its sockets, then calls
// RunPending() and RunDueTimers(). Post/RunAfter are thread-safe; the rest
// must be called on the loop thread.
#pragma once

#include <cstdint>
#include <queue>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `fn` to run on the loop thread. Thread-safe.
  void Post(absl::AnyInvocable<void()> fn);
  // Runs `fn` on the loop thread once `delay` has passed. Thread-safe.
  void RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn);

  // The file descriptor to poll for readability (posted work is waiting).
  int wake_fd() const { return wake_fd_; }

  // Marks the calling thread as the loop thread.
  void BindToCurrentThread() { loop_thread_ = std::this_thread::get_id(); }
  bool InLoopThread() const { return std::this_thread::get_id() == loop_thread_; }

  // Loop thread only. Clears the wake fd (when `woken`) and runs every
  // closure posted so far. Returns the number run.
  int RunPending(bool woken);
  // Loop thread only. Runs due timers.
  void RunDueTimers();
  // Loop thread only. Time until the earliest timer (capped at `cap`).
  absl::Duration TimeToNextTimer(absl::Duration cap);

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

  int wake_fd_ = -1;
  std::thread::id loop_thread_;
  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void()>> running_;  // loop thread only
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;  // loop thread only
  uint64_t timer_seq_ = 0;
};

}  // namespace pstrain
