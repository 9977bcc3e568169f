// Resolver: lookups off the caller's thread, bounded in time, a lookup
// that hangs never holding up the next name; numeric hosts, IPv6, the
// cache, and the hosts-file test hook.
#include "common/resolver.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace pstrain {
namespace {

// A blocking result holder for one Resolve.
struct Answer {
  absl::Notification done;
  absl::StatusOr<std::string> result;
  absl::Time at;
  Resolver::Callback callback() {
    return [this](absl::StatusOr<std::string> r) {
      result = std::move(r);
      at = absl::Now();
      done.Notify();
    };
  }
  bool Wait(absl::Duration d = absl::Seconds(5)) { return done.WaitForNotificationWithTimeout(d); }
};

// Lookups of "hang.test" block until released (never, within a test's
// time); other names map to 10.1.2.3; every lookup is counted.
struct ScriptedLookup {
  std::shared_ptr<absl::Notification> release = std::make_shared<absl::Notification>();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  HostLookup fn() const {
    return [release = release, calls = calls](const std::string& host) -> absl::StatusOr<std::string> {
      ++*calls;
      if (host == "hang.test") {
        release->WaitForNotification();
        return absl::UnavailableError("released");
      }
      return std::string("10.1.2.3");
    };
  }
  ~ScriptedLookup() { release->Notify(); }  // let stuck threads end
};

ResolverOptions Options(const ScriptedLookup& s, absl::Duration timeout = absl::Milliseconds(200)) {
  ResolverOptions o;
  o.lookup = s.fn();
  o.timeout = timeout;
  return o;
}

TEST(Resolver, NumericHostsAreAnsweredAtOnceWithoutALookup) {
  ScriptedLookup s;
  Resolver r(Options(s));
  for (const char* host : {"10.0.0.5", "::1", "fe80::1%eth0", "[::1]"}) {
    Answer a;
    r.Resolve(host, a.callback());
    ASSERT_TRUE(a.done.HasBeenNotified()) << host;  // on the calling thread
    ASSERT_TRUE(a.result.ok()) << host;
    EXPECT_EQ(*a.result, std::string(host) == "[::1]" ? "::1" : host);
  }
  EXPECT_EQ(s.calls->load(), 0);
}

TEST(Resolver, ALookupThatHangsFailsWithDeadlineExceededAtTheTimeout) {
  ScriptedLookup s;
  Resolver r(Options(s, absl::Milliseconds(200)));
  Answer a;
  const absl::Time start = absl::Now();
  r.Resolve("hang.test", a.callback());
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kDeadlineExceeded) << a.result.status();
  EXPECT_GE(a.at - start, absl::Milliseconds(190));
  EXPECT_LT(a.at - start, absl::Milliseconds(1000));
}

TEST(Resolver, AStuckLookupDoesNotHoldUpTheNextName) {
  ScriptedLookup s;
  Resolver r(Options(s, absl::Seconds(5)));
  Answer stuck, good;
  r.Resolve("hang.test", stuck.callback());
  absl::SleepFor(absl::Milliseconds(20));  // its thread is in the lookup now
  const absl::Time start = absl::Now();
  r.Resolve("good.test", good.callback());
  ASSERT_TRUE(good.Wait(absl::Seconds(1)));
  EXPECT_LT(good.at - start, absl::Milliseconds(200));
  ASSERT_TRUE(good.result.ok()) << good.result.status();
  EXPECT_EQ(*good.result, "10.1.2.3");
  EXPECT_FALSE(stuck.done.HasBeenNotified());
}

TEST(Resolver, LookupsOfOneNameJoinTheOneInFlight) {
  ScriptedLookup s;
  Resolver r(Options(s, absl::Milliseconds(300)));
  Answer a, b;
  r.Resolve("hang.test", a.callback());
  r.Resolve("hang.test", b.callback());
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(b.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.calls->load(), 1);
}

TEST(Resolver, ANameWhoseLookupsAllHangFailsFastWithUnavailable) {
  ScriptedLookup s;
  ResolverOptions o = Options(s, absl::Milliseconds(50));
  o.max_stuck_per_name = 2;
  o.stuck_retry = absl::Milliseconds(300);
  Resolver r(std::move(o));
  for (int i = 0; i < 2; ++i) {  // two stuck lookups, each past the timeout
    Answer a;
    r.Resolve("hang.test", a.callback());
    ASSERT_TRUE(a.Wait());
    EXPECT_EQ(a.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  }
  Answer a;
  const absl::Time start = absl::Now();
  r.Resolve("hang.test", a.callback());
  ASSERT_TRUE(a.Wait());
  EXPECT_LT(a.at - start, absl::Milliseconds(40));
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kUnavailable) << a.result.status();
  EXPECT_EQ(s.calls->load(), 2);
  Answer good;  // other names still get a thread
  r.Resolve("good.test", good.callback());
  ASSERT_TRUE(good.Wait());
  EXPECT_TRUE(good.result.ok()) << good.result.status();
  // One more try once stuck_retry has passed since the last one.
  absl::SleepFor(absl::Milliseconds(300));
  Answer later;
  r.Resolve("hang.test", later.callback());
  ASSERT_TRUE(later.Wait());
  EXPECT_EQ(later.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.calls->load(), 4);
}

TEST(Resolver, WithEveryThreadStuckOtherNamesFailFastInsteadOfQueueing) {
  ScriptedLookup s;
  ResolverOptions o = Options(s, absl::Milliseconds(50));
  o.max_threads = 1;
  Resolver r(std::move(o));
  Answer stuck;
  r.Resolve("hang.test", stuck.callback());
  ASSERT_TRUE(stuck.Wait());
  Answer a;
  r.Resolve("good.test", a.callback());
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kUnavailable) << a.result.status();
}

TEST(Resolver, AnswersAreCachedForTheirTtl) {
  ScriptedLookup s;
  ResolverOptions o = Options(s);
  o.cache_ttl = absl::Milliseconds(300);
  Resolver r(std::move(o));
  Answer a, b, c;
  r.Resolve("good.test", a.callback());
  ASSERT_TRUE(a.Wait());
  r.Resolve("good.test", b.callback());
  ASSERT_TRUE(b.done.HasBeenNotified());  // from the cache, on this thread
  EXPECT_EQ(s.calls->load(), 1);
  absl::SleepFor(absl::Milliseconds(350));
  r.Resolve("good.test", c.callback());
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(s.calls->load(), 2);
}

TEST(Resolver, DestroyedWhileALookupHangsReturnsAtOnce) {
  ScriptedLookup s;
  auto r = std::make_unique<Resolver>(Options(s, absl::Seconds(10)));
  Answer a;
  r->Resolve("hang.test", a.callback());
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time start = absl::Now();
  r.reset();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_FALSE(a.done.HasBeenNotified());  // dropped, never called late
}

TEST(IsNumericHost, TellsAddressesFromNames) {
  EXPECT_TRUE(IsNumericHost("127.0.0.1"));
  EXPECT_TRUE(IsNumericHost("::1"));
  EXPECT_TRUE(IsNumericHost("[2001:db8::5]"));
  EXPECT_TRUE(IsNumericHost("fe80::1%eth0"));
  EXPECT_FALSE(IsNumericHost("localhost"));
  EXPECT_FALSE(IsNumericHost("server-1.pstrain"));
  EXPECT_FALSE(IsNumericHost(""));
  EXPECT_FALSE(IsNumericHost("[::1"));
}

TEST(SystemLookup, ResolvesLocalhostToALoopbackAddress) {
  absl::StatusOr<std::string> a = SystemLookup("localhost");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(*a == "127.0.0.1" || *a == "::1") << *a;
  absl::StatusOr<std::string> v6 = SystemLookup("::1");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(*v6, "::1");
  EXPECT_EQ(SystemLookup("no-such-host.invalid").status().code(), absl::StatusCode::kNotFound);
}

TEST(HostsFileLookup, AnswersListedNamesRereadingTheFileAndFallsBackForOthers) {
  char path[] = "/tmp/pstrain-hosts-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  HostLookup lookup = HostsFileLookup(path, [](const std::string& host) -> absl::StatusOr<std::string> {
    return absl::NotFoundError("fallback " + host);
  });
  write("# test names\nserver1.test 127.0.0.2\nserver2.test fail\nv6.test ::1\n");
  EXPECT_EQ(*lookup("server1.test"), "127.0.0.2");
  EXPECT_EQ(*lookup("v6.test"), "::1");
  EXPECT_EQ(lookup("server2.test").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(lookup("other.test").status().message(), "fallback other.test");
  write("server1.test 127.0.0.3\nbad.test not-an-address\n");
  EXPECT_EQ(*lookup("server1.test"), "127.0.0.3");
  EXPECT_EQ(lookup("bad.test").status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path);
}

TEST(HostsFileLookup, AHangLineMakesTheResolverTimeOut) {
  char path[] = "/tmp/pstrain-hosts-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "gone.test hang\n";
  ResolverOptions o;
  o.hosts_file = path;
  o.timeout = absl::Milliseconds(100);
  Resolver r(std::move(o));
  Answer a;
  r.Resolve("gone.test", a.callback());
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::remove(path);  // the lookup thread stays stuck: as getaddrinfo would
}

}  // namespace
}  // namespace pstrain
