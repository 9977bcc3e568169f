// EventLoop: the queue and timers of a process's I/O thread.
//
// The I/O thread owns the sockets; other threads reach it by posting
// closures (Post) which the loop runs in order. Posting to an idle loop
// writes one eventfd; posting to a loop that already has work queued costs
// no system call. Timers run on the loop thread. The transport that embeds
// the loop drives it: it polls wake_fd() beside its sockets, then calls
// RunPending() and RunDueTimers(). Post/RunAfter are thread-safe; the rest
// must be called on the loop thread.
//
// Inline runs (optional, for transports that support them): a loop thread
// that brackets its blocking wait with EndWork()/BeginWork() lets another
// thread run a closure *as the loop* while it waits (TryRunInline): the
// closure runs at once on the calling thread, holding the loop's lock, so
// it is still serialized with everything else the loop does, and the
// hand-off to the I/O thread (an eventfd write and a wake-up) is saved.
// While it runs, InLoopThread() is true on that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

// Optional capability of a transport (ZmqTransport) that lets the threads
// making calls drive their own I/O. RpcNode uses it when its transport
// provides it:
//  - requests made outside the I/O thread may be held back (corked) so that
//    several leave together; FlushCalls() sends whatever is held, and the
//    transport sends it by itself within a few milliseconds anyway;
//  - a thread about to block on the reply to a call may receive that reply
//    itself (ReceiveAsGuest), instead of the I/O thread receiving it and
//    then waking the caller: one hand-off and its wake-ups less.
class CallerDrivenIo {
 public:
  virtual ~CallerDrivenIo() = default;
  // Sends the requests held back so far. Thread-safe; cheap when none are.
  virtual void FlushCalls() = 0;
  // Sends held requests, then reads the connection `peer` on the calling
  // thread, as the loop, until `done()` (checked after each read), until
  // `deadline`, or until `wake_fd` (an eventfd the caller owns) is written.
  // Returns false at once, having only flushed, when it cannot (no such
  // connection, another thread is reading it, the I/O thread is busy or not
  // running, or this is the I/O thread); the caller then blocks as usual.
  virtual bool ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done, int wake_fd,
                              absl::Time deadline) = 0;
};

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
  // Makes the loop thread's poll of wake_fd() return. Thread-safe.
  void Wake();

  // Marks the calling thread as the loop thread.
  void BindToCurrentThread() { loop_thread_ = std::this_thread::get_id(); }
  // True on the loop thread, and on a thread running a closure inline.
  bool InLoopThread() const {
    return std::this_thread::get_id() == loop_thread_ || inline_loop_ == this;
  }

  // Loop thread only. Clears the wake fd (when `woken`) and runs every
  // closure posted so far. Returns the number run.
  int RunPending(bool woken);
  // Loop thread only. True when closures are queued.
  bool HasPending();
  // Loop thread only. Runs due timers.
  void RunDueTimers();
  // Loop thread only. Time until the earliest timer (capped at `cap`).
  absl::Duration TimeToNextTimer(absl::Duration cap);

  // --- inline runs ---------------------------------------------------------
  // Loop thread: takes the loop's lock (after a wait) / gives it up before
  // blocking until `until` (the wait's timeout). Between EndWork and
  // BeginWork other threads may run closures inline.
  void BeginWork();
  void EndWork(absl::Time until);
  // Loop thread, when it exits: gives up the lock for good (no inline runs).
  void StopWork();
  // Any thread but the loop thread: when the loop thread is waiting and no
  // posted closure is queued, runs `fn` now, as the loop, and returns true;
  // otherwise returns false without running it (the caller posts instead).
  // After `fn`, wakes the loop thread if a timer it added is due before the
  // loop thread's wait ends.
  bool TryRunInline(absl::FunctionRef<void()> fn);
  // Any thread but the loop thread: like TryRunInline, but keeps the loop
  // (InLoopThread() true) until LeaveGuest(); in between, PauseGuest() and
  // ResumeGuest() let go of the lock around a blocking wait. ResumeGuest
  // blocks until the lock is free again and returns false when the loop
  // thread has exited meanwhile (the guest must then touch no loop state,
  // only call LeaveGuest).
  bool TryEnterGuest();
  void PauseGuest();
  bool ResumeGuest();
  void LeaveGuest();

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

  static thread_local const EventLoop* inline_loop_;

  int wake_fd_ = -1;
  std::thread::id loop_thread_;
  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(mu_);
  // Mirrors !posted_.empty() for a lock-free check.
  std::atomic<bool> has_posted_{false};
  std::vector<absl::AnyInvocable<void()>> running_;  // loop thread only
  // Loop state below: the loop thread's, or an inline runner's while it
  // holds work_mu_.
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  uint64_t timer_seq_ = 0;
  // Held by whoever does loop work when inline runs are in use.
  std::mutex work_mu_;
  bool waiting_ = false;       // guarded by work_mu_: the loop thread is in its wait
  absl::Time wait_until_;      // guarded by work_mu_: when that wait ends
};

}  // namespace pstrain
