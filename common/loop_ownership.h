// LoopOwnership: who may act as an EventLoop's loop right now.
//
// One I/O thread owns a loop and everything it guards (a transport's
// sockets). To save a hand-off per call, a transport may let other threads
// act as the loop while that thread sits in its wait (ZmqTransport's "the
// caller drives the I/O" fast path):
//  - an inline runner takes the loop for one short piece of work (sending a
//    batch) and gives it back (TryRunInline ... Leave);
//  - a guest takes it to receive its own reply: it keeps the loop, lets go
//    of it around each blocking wait of its own (PauseGuest/ResumeGuest),
//    then leaves (TryEnterGuest ... Leave).
// At any moment at most one of them may touch loop state: the I/O thread
// (between BeginWork and EndWork; posted closures and timers run there), an
// inline runner or a guest (from a successful Try... to Leave or
// PauseGuest). LoopOwnership is that capability: an absl::Mutex plus
// whether the I/O thread is in its wait. Loop state is marked
// ABSL_GUARDED_BY(loop_.owner()) and functions that touch it
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_.owner()), so Clang's -Wthread-safety
// checks every access (the ctest common.thread_safety_analysis runs it).
//
// Modes: kShared lets other threads in as above; kSingleOwner never does
// (every Try... returns false at once): only the I/O thread acts as the
// loop, and it may hold the loop across its waits too.
//
// Owned by its EventLoop (EventLoop::owner()). Thread-safe; each method
// says who may call it.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class EventLoop;

// The wake-up of a thread waiting as a guest: an eventfd of that thread's
// own (one per thread, made on first use) that its blocking wait polls, so
// that whoever ends the wait another way (the call completed elsewhere, the
// connection closed, the loop stopped) can end it. A value: copies name the
// same eventfd, which lives as long as its thread. Notify() is thread-safe.
class GuestWake {
 public:
  GuestWake() = default;  // none: valid() is false
  // The calling thread's; not valid() when no eventfd could be made.
  static GuestWake OfThisThread();

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool IsCallingThread() const { return thread_ == std::this_thread::get_id(); }
  // Ends the guest's wait (now, or the next one if it is not waiting); does
  // nothing when called by the guest itself or when not valid().
  void Notify() const;
  // The guest, after its wait returned with fd() readable: consumes the
  // Notify() calls so far.
  void Clear() const;

 private:
  GuestWake(int fd, std::thread::id thread) : fd_(fd), thread_(thread) {}

  int fd_ = -1;
  std::thread::id thread_;
};

class ABSL_LOCKABLE LoopOwnership {
 public:
  enum class Mode { kSingleOwner, kShared };

  // `loop` is the loop whose state this guards (it must outlive this).
  LoopOwnership(EventLoop* loop, Mode mode) : loop_(loop), shared_(mode == Mode::kShared) {}
  LoopOwnership(const LoopOwnership&) = delete;
  LoopOwnership& operator=(const LoopOwnership&) = delete;

  bool shared() const { return shared_; }

  // --- the I/O thread ------------------------------------------------------
  // Marks the calling thread as the I/O thread (once, before BeginWork).
  void BindToCurrentThread() { io_thread_.store(std::this_thread::get_id()); }
  bool OnIoThread() const {
    return io_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  // True on the I/O thread, and on a thread acting as the loop (an inline
  // runner, or a guest that is not paused).
  bool InLoop() const { return acting_ == this || OnIoThread(); }
  // I/O thread: takes the loop, waiting while an inline runner or a guest
  // holds it.
  void BeginWork() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  // I/O thread: lets go of the loop for a wait that ends by `until`; until
  // BeginWork, other threads may act as the loop.
  void EndWork(absl::Time until) ABSL_UNLOCK_FUNCTION();
  // I/O thread, as it exits: lets go of the loop for good. Nobody enters
  // after this, and a paused guest's ResumeGuest returns false.
  void StopWork() ABSL_UNLOCK_FUNCTION();

  // --- other threads -------------------------------------------------------
  // Any thread but the I/O thread, not acting as the loop already. When the
  // loop is kShared, the I/O thread is in its wait and no posted closure is
  // queued (work done inline must not overtake work posted before it),
  // takes the loop and returns true: the caller acts as the loop (InLoop())
  // until Leave(). Otherwise returns false at once without taking it (the
  // caller posts its work or blocks as usual).
  bool TryRunInline() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return TryTake(); }
  // Like TryRunInline, for a guest: one that will PauseGuest around its
  // blocking waits.
  bool TryEnterGuest() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return TryTake(); }
  // Guest: lets go of the loop before a blocking wait (InLoop() is false
  // meanwhile); wakes the I/O thread when a timer added meanwhile is due
  // before its wait ends.
  void PauseGuest() ABSL_UNLOCK_FUNCTION();
  // Guest, after PauseGuest: takes the loop back, waiting while anyone else
  // holds it. Returns false when the I/O thread has stopped meanwhile: the
  // guest then holds a loop that has closed its state, touches none of it,
  // and calls Leave().
  bool ResumeGuest() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  // Guest: PauseGuest, a wait until `fd` is readable, `wake` is notified
  // or `timeout` passes, then ResumeGuest (its result).
  bool WaitAsGuest(int fd, const GuestWake& wake, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this);
  // Inline runner or guest: gives the loop back (waking the I/O thread like
  // PauseGuest does).
  void Leave() ABSL_UNLOCK_FUNCTION();

  // Tells the analysis the caller holds the loop, where the code shows it
  // but the analysis cannot (posted closures, a branch on InLoop()). Aborts
  // when nobody holds it.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() { mu_.AssertHeld(); }

 private:
  bool TryTake() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true);
  // Before the holder lets go: wake the I/O thread if a timer is now due
  // before its wait ends.
  void WakeLoopForTimers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The loop the calling thread acts as, while it is an inline runner or a
  // guest (not paused).
  static thread_local const LoopOwnership* acting_;

  EventLoop* const loop_;
  const bool shared_;
  std::atomic<std::thread::id> io_thread_{};
  mutable absl::Mutex mu_;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;  // the I/O thread is in its wait
  absl::Time wait_until_ ABSL_GUARDED_BY(mu_);  // when that wait ends
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // StopWork was called
};

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
  // thread, as a guest of the loop, until `done()` (checked after each
  // read), until `deadline`, or until `wake` (the calling thread's) is
  // notified. Returns false at once (having at most flushed) when it cannot:
  // no such connection, another guest reads it, the I/O thread is busy or
  // not running, the loop is kSingleOwner, or the caller already acts as the
  // loop; the caller then blocks as usual.
  virtual bool ReceiveAsGuest(int32_t peer, absl::FunctionRef<bool()> done, const GuestWake& wake,
                              absl::Time deadline) = 0;
};

}  // namespace pstrain
