// LoopOwnership on its own: an I/O thread that runs an EventLoop the way
// ZmqTransport::Run does, and other threads acting as the loop while it
// waits (inline runs and guests). What must hold: one owner at a time, no
// work lost or done twice, the order of posted work kept, and no hang when
// the I/O thread stops under a guest.
#include "common/loop_ownership.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/event_loop.h"

namespace pstrain {
namespace {

int Ms(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

// A transport's I/O thread in miniature: posted work and timers while it
// holds the loop, a poll of the wake fd (and of `fd` when not -1) outside
// it, and `on_turn` on every pass (while it holds the loop).
class IoThread {
 public:
  IoThread(EventLoop* loop, int fd = -1, std::function<void()> on_turn = nullptr)
      : loop_(loop), fd_(fd), on_turn_(std::move(on_turn)) {
    thread_ = std::thread([this] { Run(); });
    started_.WaitForNotification();
  }
  ~IoThread() { Stop(); }
  void Stop() {
    if (!running_.exchange(false)) return;
    loop_->Wake();
    thread_.join();
  }

 private:
  void Run() {
    LoopOwnership& owner = loop_->owner();
    owner.BindToCurrentThread();
    owner.BeginWork();
    started_.Notify();
    bool woken = false;
    while (running_.load()) {
      loop_->RunPending(woken);
      loop_->RunDueTimers();
      if (on_turn_) on_turn_();
      // A long wait: a missed wake-up shows as a test running into its bound.
      absl::Duration wait = loop_->HasPending() ? absl::ZeroDuration()
                                                : loop_->TimeToNextTimer(absl::Seconds(10));
      owner.EndWork(absl::Now() + wait);
      pollfd pfds[2] = {{loop_->wake_fd(), POLLIN, 0}, {fd_, POLLIN, 0}};
      int rc = poll(pfds, fd_ >= 0 ? 2 : 1, Ms(wait));
      owner.BeginWork();
      woken = rc > 0 && (pfds[0].revents & POLLIN);
    }
    loop_->RunPending(true);
    owner.StopWork();
  }

  EventLoop* loop_;
  int fd_;
  std::function<void()> on_turn_;
  std::atomic<bool> running_{true};
  absl::Notification started_;
  std::thread thread_;
};

// Enters as a guest, retrying while the I/O thread is busy (it is idle
// apart from short passes, so this takes microseconds).
bool EnterGuest(LoopOwnership& owner) {
  absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    if (owner.TryEnterGuest()) return true;
    absl::SleepFor(absl::Microseconds(100));
  }
  return false;
}

// Both the I/O thread and a guest read whatever arrives on one socket,
// whoever holds the loop when it does. Each record must be read once, and
// in order: reads and their bookkeeping happen only as the loop.
TEST(LoopOwnership, GuestAndIoThreadRacingForOneSocketReadEachRecordOnceInOrder) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
  EventLoop loop(LoopOwnership::Mode::kShared);
  constexpr uint64_t kRecords = 20000;
  // Loop state: touched only by whoever acts as the loop.
  std::vector<uint64_t> got;
  int inside = 0;  // threads in a read right now
  bool overlap = false;
  std::atomic<uint64_t> count{0}, by_guest{0};
  auto drain = [&](bool guest) {
    if (++inside != 1) overlap = true;
    uint64_t v;
    while (read(sv[1], &v, sizeof(v)) == sizeof(v)) {
      got.push_back(v);
      count.store(got.size());
      if (guest) by_guest.fetch_add(1);
    }
    --inside;
  };
  IoThread io(&loop, sv[1], [&] { drain(false); });
  std::thread producer([&] {
    for (uint64_t i = 0; i < kRecords; ++i) {
      while (write(sv[0], &i, sizeof(i)) != sizeof(i)) absl::SleepFor(absl::Microseconds(50));
      if (i % 64 == 0) absl::SleepFor(absl::Microseconds(20));
    }
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::thread guest([&] {
    LoopOwnership& owner = loop.owner();
    const GuestWake wake = GuestWake::OfThisThread();
    while (count.load() < kRecords && absl::Now() < deadline) {
      if (!owner.TryEnterGuest()) {
        std::this_thread::yield();
        continue;
      }
      bool alive = true;
      for (int round = 0; round < 8 && alive; ++round) {
        drain(true);
        alive = owner.WaitAsGuest(sv[1], wake, absl::Milliseconds(1));
      }
      if (alive) drain(true);
      owner.Leave();
    }
  });
  producer.join();
  guest.join();
  absl::Time until = absl::Now() + absl::Seconds(10);
  while (count.load() < kRecords && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
  io.Stop();
  EXPECT_FALSE(overlap);
  ASSERT_EQ(got.size(), kRecords);
  for (uint64_t i = 0; i < kRecords; ++i) ASSERT_EQ(got[i], i) << "at " << i;
  EXPECT_GT(by_guest.load(), 0u);  // the race was real: both read
  EXPECT_LT(by_guest.load(), kRecords);
  close(sv[0]);
  close(sv[1]);
}

TEST(LoopOwnership, PausedGuestLetsTheIoThreadWorkAndResumeTakesTheLoopBack) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);
  LoopOwnership& owner = loop.owner();
  ASSERT_TRUE(EnterGuest(owner));
  EXPECT_TRUE(loop.InLoopThread());
  // Posted while the guest holds the loop: it waits for the guest.
  std::atomic<bool> ran{false};
  absl::Notification done;
  std::thread poster([&] {
    loop.Post([&] {
      ran = true;
      done.Notify();
    });
  });
  poster.join();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(ran.load());
  owner.PauseGuest();
  EXPECT_FALSE(loop.InLoopThread());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(owner.ResumeGuest());
  EXPECT_TRUE(loop.InLoopThread());
  owner.Leave();
  EXPECT_FALSE(loop.InLoopThread());
}

TEST(LoopOwnership, NotifyEndsAGuestsWaitEarly) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);
  LoopOwnership& owner = loop.owner();
  int never[2];
  ASSERT_EQ(pipe(never), 0);  // nothing is ever written
  const GuestWake wake = GuestWake::OfThisThread();
  ASSERT_TRUE(EnterGuest(owner));
  std::thread notifier([wake] {
    absl::SleepFor(absl::Milliseconds(30));
    wake.Notify();
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(owner.WaitAsGuest(never[0], wake, absl::Seconds(20)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(loop.InLoopThread());
  owner.Leave();
  notifier.join();
  close(never[0]);
  close(never[1]);
}

TEST(LoopOwnership, NobodyElseActsAsTheLoopWhileAGuestHoldsIt) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);
  LoopOwnership& owner = loop.owner();
  ASSERT_TRUE(EnterGuest(owner));
  // Nobody else gets in meanwhile.
  std::atomic<int> others_in{0};
  std::thread other([&] {
    for (int i = 0; i < 1000; ++i) {
      if (owner.TryRunInline()) {
        others_in++;
        owner.Leave();
      }
      if (owner.TryEnterGuest()) {
        others_in++;
        owner.Leave();
      }
    }
  });
  other.join();
  EXPECT_EQ(others_in.load(), 0);
  owner.Leave();
}

TEST(LoopOwnership, StopUnderAGuestEndsPromptlyAndResumeReturnsFalse) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  auto io = std::make_unique<IoThread>(&loop);
  LoopOwnership& owner = loop.owner();
  ASSERT_TRUE(EnterGuest(owner));
  // The I/O thread is told to stop while the guest holds the loop: it waits
  // for its turn, then stops.
  absl::Notification stopped;
  std::thread stopper([&] {
    io->Stop();
    stopped.Notify();
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(stopped.HasBeenNotified());
  const absl::Time start = absl::Now();
  owner.PauseGuest();
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_FALSE(owner.ResumeGuest());  // the loop is gone: touch nothing
  owner.Leave();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  stopper.join();
  EXPECT_FALSE(owner.TryEnterGuest());
  EXPECT_FALSE(owner.TryRunInline());
  EXPECT_FALSE(loop.InLoopThread());
}

TEST(LoopOwnership, StopWhileAGuestIsPausedMakesResumeReturnFalse) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  auto io = std::make_unique<IoThread>(&loop);
  LoopOwnership& owner = loop.owner();
  ASSERT_TRUE(EnterGuest(owner));
  owner.PauseGuest();
  io->Stop();
  const absl::Time start = absl::Now();
  EXPECT_FALSE(owner.ResumeGuest());
  owner.Leave();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

// Each thread's work runs in the order it was made, whether it ran inline
// (the loop was free) or was posted (it was not, or work was queued).
TEST(LoopOwnership, InlineRunsNeverOvertakeWorkPostedBefore) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);
  LoopOwnership& owner = loop.owner();
  constexpr int kThreads = 2, kItems = 5000;
  std::vector<std::pair<int, int>> log;  // loop state
  std::atomic<int> inline_runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kItems; ++i) {
        if (owner.TryRunInline()) {
          log.emplace_back(t, i);
          owner.Leave();
          inline_runs++;
        } else {
          loop.Post([&log, t, i] { log.emplace_back(t, i); });
        }
        if (i % 100 == 0) absl::SleepFor(absl::Microseconds(200));  // let the loop go idle
      }
    });
  }
  for (auto& th : threads) th.join();
  absl::Notification drained;
  loop.Post([&] { drained.Notify(); });
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(absl::Seconds(10)));
  io.Stop();
  ASSERT_EQ(log.size(), static_cast<size_t>(kThreads * kItems));
  std::vector<int> next(kThreads, 0);
  for (const auto& [t, i] : log) {
    ASSERT_EQ(i, next[t]) << "thread " << t;
    next[t]++;
  }
  EXPECT_GT(inline_runs.load(), 0);  // the fast path was taken
}

TEST(LoopOwnership, InlineRunIsRefusedOnTheIoThreadItself) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);
  absl::Notification done;
  bool inline_ok = true, guest_ok = true, in_loop = false;
  loop.Post([&] {
    in_loop = loop.InLoopThread();
    inline_ok = loop.owner().TryRunInline();
    guest_ok = loop.owner().TryEnterGuest();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(in_loop);
  EXPECT_FALSE(inline_ok);
  EXPECT_FALSE(guest_ok);
}

TEST(LoopOwnership, TimerAddedByAGuestWakesTheWaitingIoThread) {
  EventLoop loop(LoopOwnership::Mode::kShared);
  IoThread io(&loop);  // waits up to 10 s when nothing is due
  LoopOwnership& owner = loop.owner();
  absl::Notification fired;
  ASSERT_TRUE(EnterGuest(owner));
  loop.RunAfter(absl::Milliseconds(20), [&] { fired.Notify(); });
  owner.Leave();
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(3)));
}

TEST(LoopOwnership, SingleOwnerLoopNeverLetsAnotherThreadIn) {
  EventLoop loop(LoopOwnership::Mode::kSingleOwner);
  IoThread io(&loop);
  LoopOwnership& owner = loop.owner();
  EXPECT_FALSE(owner.shared());
  int in = 0;
  for (int i = 0; i < 1000; ++i) {
    if (owner.TryRunInline()) {
      ++in;
      owner.Leave();
    }
    if (owner.TryEnterGuest()) {
      ++in;
      owner.Leave();
    }
    if (i % 100 == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(in, 0);
  // Posted work still runs, on the I/O thread.
  absl::Notification ran;
  loop.Post([&] { ran.Notify(); });
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST(GuestWake, NotifyEndsAnotherThreadsWaitButNotItsOwn) {
  GuestWake mine = GuestWake::OfThisThread();
  ASSERT_TRUE(mine.valid());
  EXPECT_TRUE(mine.IsCallingThread());
  EXPECT_EQ(GuestWake::OfThisThread().fd(), mine.fd());  // one per thread
  mine.Notify();  // by the guest itself: nothing
  pollfd pfd{mine.fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 0);
  std::thread other([mine] {
    EXPECT_FALSE(mine.IsCallingThread());
    EXPECT_NE(GuestWake::OfThisThread().fd(), mine.fd());
    mine.Notify();
  });
  other.join();
  EXPECT_EQ(poll(&pfd, 1, 1000), 1);
  mine.Clear();
  EXPECT_EQ(poll(&pfd, 1, 0), 0);
  GuestWake none;
  EXPECT_FALSE(none.valid());
  none.Notify();  // harmless
}

}  // namespace
}  // namespace pstrain
