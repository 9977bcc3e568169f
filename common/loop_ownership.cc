#include "common/loop_ownership.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/event_loop.h"

namespace pstrain {

thread_local const LoopOwnership* LoopOwnership::acting_ = nullptr;

void LoopOwnership::BeginWork() {
  mu_.Lock();
  waiting_ = false;
}

void LoopOwnership::EndWork(absl::Time until) {
  waiting_ = true;
  wait_until_ = until;
  mu_.Unlock();
}

void LoopOwnership::StopWork() {
  waiting_ = false;
  stopped_ = true;
  // A thread made later may get the same id.
  io_thread_.store(std::thread::id());
  mu_.Unlock();
}

bool LoopOwnership::TryTake() {
  if (!shared_) return false;
  // Keep the order: what was posted before runs first.
  if (loop_->HasPending()) return false;
  if (!mu_.TryLock()) return false;
  // Posted meanwhile (before the lock): it must run first too.
  if (!waiting_ || loop_->HasPending()) {
    mu_.Unlock();
    return false;
  }
  acting_ = this;
  return true;
}

void LoopOwnership::WakeLoopForTimers() {
  if (loop_->HasTimerBefore(wait_until_)) loop_->Wake();
}

void LoopOwnership::PauseGuest() {
  acting_ = nullptr;
  WakeLoopForTimers();
  mu_.Unlock();
}

bool LoopOwnership::ResumeGuest() {
  mu_.Lock();
  acting_ = this;
  return !stopped_;
}

bool LoopOwnership::WaitAsGuest(int fd, const GuestWake& wake, absl::Duration timeout) {
  PauseGuest();
  pollfd pfds[2] = {{fd, POLLIN, 0}, {wake.fd(), POLLIN, 0}};
  const int ms = timeout <= absl::ZeroDuration()
                     ? 0
                     : static_cast<int>(absl::ToInt64Milliseconds(timeout + absl::Microseconds(999)));
  if (poll(pfds, 2, ms) > 0 && (pfds[1].revents & POLLIN)) wake.Clear();
  return ResumeGuest();
}

void LoopOwnership::Leave() {
  acting_ = nullptr;
  WakeLoopForTimers();
  mu_.Unlock();
}

GuestWake GuestWake::OfThisThread() {
  struct Fd {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ~Fd() {
      if (fd >= 0) close(fd);
    }
  };
  thread_local Fd fd;
  return GuestWake(fd.fd, std::this_thread::get_id());
}

void GuestWake::Notify() const {
  if (fd_ < 0 || IsCallingThread()) return;
  uint64_t one = 1;
  ssize_t n;
  do {
    n = write(fd_, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void GuestWake::Clear() const {
  uint64_t value;
  ssize_t n;
  do {
    n = read(fd_, &value, sizeof(value));
  } while (n < 0 && errno == EINTR);
}

}  // namespace pstrain
