// ZmqTransport and host names: a peer whose name lookup hangs forever
// must not slow any other connection of the process (its sends fail fast
// with Unavailable), and a peer whose name moves to another address is
// followed. The resolver is scripted through ZmqTransportOptions.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/resolver.h"
#include "common/rpc.h"
#include "common/zmq_transport.h"

namespace pstrain {
namespace {

// What the scripted names resolve to; "hang" blocks the lookup until the
// test ends (as a DNS server that stopped answering).
class Names {
 public:
  ~Names() { release_->Notify(); }
  void Set(const std::string& name, const std::string& address) {
    absl::MutexLock lock(&map_->mu);
    map_->answers[name] = address;
  }
  int lookups() const { return lookups_->load(); }
  std::shared_ptr<Resolver> MakeResolver() const {
    ResolverOptions o;
    o.timeout = absl::Milliseconds(500);
    o.cache_ttl = absl::ZeroDuration();
    o.lookup = [map = map_, release = release_,
                lookups = lookups_](const std::string& host) -> absl::StatusOr<std::string> {
      ++*lookups;
      std::string address;
      {
        absl::MutexLock lock(&map->mu);
        auto it = map->answers.find(host);
        if (it == map->answers.end()) return absl::NotFoundError("no such name " + host);
        address = it->second;
      }
      if (address == "hang") {
        release->WaitForNotification();
        return absl::UnavailableError("released");
      }
      return address;
    };
    return std::make_shared<Resolver>(std::move(o));
  }

 private:
  struct Map {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::string> answers ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<Map> map_ = std::make_shared<Map>();
  std::shared_ptr<absl::Notification> release_ = std::make_shared<absl::Notification>();
  std::shared_ptr<std::atomic<int>> lookups_ = std::make_shared<std::atomic<int>>(0);
};

Message Text(const std::string& s) {
  Message m;
  m.header = Buffer::FromString(std::string(s));
  return m;
}

// An echo node bound at `bind`.
struct Echo {
  explicit Echo(const std::string& bind) : node(std::make_unique<ZmqTransport>(ZmqTransportOptions())) {
    auto ep = node.Bind(bind);
    EXPECT_TRUE(ep.ok()) << ep.status();
    if (ep.ok()) endpoint = *ep;
    EXPECT_TRUE(node.Start([this](RpcRequest&& r) {
      node.Reply(r, Text(absl::StrCat("re:", r.message.header.view())));
    }).ok());
  }
  ~Echo() { node.Stop(); }
  std::string port() const { return endpoint.substr(endpoint.rfind(':') + 1); }
  RpcNode node;
  std::string endpoint;
};

std::unique_ptr<RpcNode> Client(const Names& names) {
  ZmqTransportOptions o;
  o.name = "client";
  o.resolver = names.MakeResolver();
  return std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(std::move(o)));
}

TEST(ZmqTransportResolve, AHangingNameNeitherDelaysOtherPeersNorItsOwnSendFailures) {
  Echo echo("tcp://127.0.0.1:0");
  Names names;
  names.Set("hang.test", "hang");
  names.Set("good.test", "127.0.0.1");
  auto client = Client(names);
  ASSERT_TRUE(client->Start(nullptr).ok());
  // The hanging name points at a live peer: resolved, it would answer.
  PeerId hanging = client->Connect("tcp://hang.test:" + echo.port());
  PeerId by_name = client->Connect("tcp://good.test:" + echo.port());
  PeerId by_number = client->Connect(echo.endpoint);
  // 2.5 s of round trips, 10 ms apart, each while a call to the hanging
  // peer is pending: the transport resolves it again every second, and
  // every one of those lookups hangs.
  std::vector<double> ms;
  absl::Mutex mu;
  int hanging_failures = 0, hanging_other = 0;
  double slowest_failure_ms = 0;
  const absl::Time end = absl::Now() + absl::Milliseconds(2500);
  for (int i = 0; absl::Now() < end || i < 200; ++i) {
    const absl::Time t0 = absl::Now();
    client->Call(hanging, Text("h"), t0 + absl::Milliseconds(100))
        .OnDone([&, t0](const absl::StatusOr<Message>& hr) {
          absl::MutexLock lock(&mu);
          if (hr.status().code() == absl::StatusCode::kUnavailable) {
            ++hanging_failures;
          } else {
            ++hanging_other;
          }
          slowest_failure_ms = std::max(slowest_failure_ms, absl::ToDoubleMilliseconds(absl::Now() - t0));
        });
    PeerId to = i % 2 == 0 ? by_name : by_number;
    const absl::Time t1 = absl::Now();
    absl::StatusOr<Message> r =
        client->Call(to, Text(absl::StrCat(i)), t1 + absl::Seconds(5)).Wait();
    ASSERT_TRUE(r.ok()) << "round trip " << i << ": " << r.status();
    EXPECT_EQ(r->header.view(), absl::StrCat("re:", i));
    // The first call to the name waits for its first lookup; the rest count.
    if (i > 0 || to == by_number) ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t1));
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(200));  // the last calls to the hanging peer end
  int failed = 0, other = 0;
  double slowest = 0;
  {
    absl::MutexLock lock(&mu);
    failed = hanging_failures;
    other = hanging_other;
    slowest = slowest_failure_ms;
  }
  EXPECT_EQ(other, 0);
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2], p99 = ms[ms.size() * 99 / 100], worst = ms.back();
  std::printf("%zu round trips beside a hanging lookup: median %.2f ms, p99 %.2f ms, max %.2f ms; "
              "%d calls to the hanging peer failed Unavailable, slowest in %.0f ms (deadline 100); "
              "%d lookups\n",
              ms.size(), median, p99, worst, failed, slowest,
              names.lookups());
  // Far below a heartbeat interval (0.2 s in the recovery tests, 1 s by default).
  EXPECT_LT(p99, 50.0);
  EXPECT_LT(worst, 150.0);
  EXPECT_LT(slowest, 150.0);
  EXPECT_GE(names.lookups(), 3);  // it kept trying, once a second
  const absl::Time stop = absl::Now();
  client->Stop();
  client.reset();  // no wait for the lookups still hanging
  EXPECT_LT(absl::Now() - stop, absl::Seconds(1));
}

TEST(ZmqTransportResolve, SendsToAPeerWhoseNameHangsFailAtOnceWithUnavailable) {
  Names names;
  names.Set("hang.test", "hang");
  ZmqTransportOptions o;
  o.resolver = names.MakeResolver();
  ZmqTransport transport(std::move(o));
  absl::Mutex mu;
  std::vector<std::pair<absl::Time, absl::Status>> failures;
  ASSERT_TRUE(transport
                  .Start(nullptr,
                         [&](PeerId, uint64_t, absl::Status st) {
                           absl::MutexLock lock(&mu);
                           failures.emplace_back(absl::Now(), std::move(st));
                         })
                  .ok());
  PeerId peer = transport.Connect("tcp://hang.test:7000");
  const absl::Time sent = absl::Now();
  transport.SendRequest(peer, 1, Text("x"));
  transport.FlushCalls();
  absl::Time until = absl::Now() + absl::Seconds(2);
  while (absl::Now() < until) {
    {
      absl::MutexLock lock(&mu);
      if (!failures.empty()) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::MutexLock lock(&mu);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_LT(failures[0].first - sent, absl::Milliseconds(100));
  EXPECT_EQ(failures[0].second.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(failures[0].second.message().find("resolving hang.test"), absl::string_view::npos)
      << failures[0].second;
  transport.Stop();
}

TEST(ZmqTransportResolve, APeerWhoseNameMovesToAnotherAddressIsFollowed) {
  Names names;
  auto first = std::make_unique<Echo>("tcp://127.0.0.2:0");
  const std::string port = first->port();
  names.Set("mover.test", "127.0.0.2");
  auto client = Client(names);
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect("tcp://mover.test:" + port);
  auto r = client->Call(peer, Text("a"), absl::Now() + absl::Seconds(5)).Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  // The peer moves (a container restarted elsewhere): the old address stops
  // answering, the name now gives the new one, on the same port.
  first.reset();
  names.Set("mover.test", "127.0.0.3");
  Echo second("tcp://127.0.0.3:" + port);
  ASSERT_FALSE(second.endpoint.empty());
  const absl::Time moved = absl::Now();
  absl::StatusOr<Message> again = absl::UnavailableError("not tried");
  while (absl::Now() - moved < absl::Seconds(5)) {
    again = client->Call(peer, Text("b"), absl::Now() + absl::Milliseconds(300)).Wait();
    if (again.ok()) break;
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - moved);
  std::printf("messages flow to the moved peer again %.2f s after it moved\n", secs);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->header.view(), "re:b");
  EXPECT_LT(secs, 2.5);  // a lookup at most once a second, then a connect
  client->Stop();
}

}  // namespace
}  // namespace pstrain
