// ZmqTransport under concurrency: callers that send inline and receive
// their own replies (guest receive) racing with each other, with callbacks
// completed on the I/O thread, with replies sent from other threads and
// with peers that answer late. Every call must end with its own reply.
// Each test runs with the caller-driven fast path on and off (the I/O
// thread the sockets' only owner).
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rpc.h"
#include "common/zmq_transport.h"

namespace pstrain {
namespace {

Message Text(const std::string& header, size_t payload_bytes = 0) {
  Message m;
  m.header = Buffer::FromString(std::string(header));
  if (payload_bytes > 0) m.payloads.push_back(Buffer::FromString(std::string(payload_bytes, 'p')));
  return m;
}

std::unique_ptr<RpcNode> Node(bool caller_driven_io) {
  ZmqTransportOptions options;
  options.caller_driven_io = caller_driven_io;
  return std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(options));
}

// Echo server; every `defer_every`-th request is answered from another
// thread a little later (a reply sent off the I/O thread).
class Echo {
 public:
  Echo(int defer_every, bool caller_driven_io)
      : node_(Node(caller_driven_io)), defer_every_(defer_every) {
    auto ep = node_->Bind("tcp://127.0.0.1:0");
    EXPECT_TRUE(ep.ok()) << ep.status();
    endpoint_ = *ep;
    EXPECT_TRUE(node_->Start([this](RpcRequest&& req) { OnRequest(std::move(req)); }).ok());
  }
  ~Echo() {
    node_->Stop();
    for (auto& t : deferred_) t.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void OnRequest(RpcRequest&& req) {
    Message reply;
    reply.header = Buffer::FromString(absl::StrCat("re:", req.message.header.view()));
    reply.payloads = req.message.payloads;
    if (defer_every_ > 0 && ++count_ % defer_every_ == 0) {
      deferred_.emplace_back([this, route = req.route, id = req.id, r = std::move(reply)]() mutable {
        absl::SleepFor(absl::Microseconds(200));
        node_->Reply(route, id, std::move(r));
      });
      return;
    }
    node_->Reply(req, std::move(reply));
  }

  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  int defer_every_;
  int count_ = 0;                        // I/O thread
  std::vector<std::thread> deferred_;    // I/O thread until Stop
};

class ZmqTransportTest : public ::testing::TestWithParam<bool> {
 protected:
  bool caller_driven() const { return GetParam(); }
  std::unique_ptr<RpcNode> NewNode() const { return Node(caller_driven()); }
};

TEST_P(ZmqTransportTest, ConcurrentCallersEachGetTheirOwnReplies) {
  Echo server(/*defer_every=*/7, caller_driven());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(server.endpoint());
  constexpr int kThreads = 4, kCalls = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kCalls; ++i) {
        std::string text = absl::StrCat(t, ":", i);
        size_t bytes = rng() % 3 == 0 ? 4096 + rng() % 100000 : rng() % 64;
        // Sometimes two calls back to back, waited in reverse order.
        RpcFuture a = client->Call(peer, Text(text, bytes), absl::Now() + absl::Seconds(20));
        RpcFuture b;
        if (i % 3 == 0) b = client->Call(peer, Text(text + "b"), absl::Now() + absl::Seconds(20));
        if (b.valid()) {
          auto rb = b.Wait();
          if (!rb.ok() || rb->header.view() != "re:" + text + "b") failures++;
        }
        auto ra = a.Wait();
        if (!ra.ok() || ra->header.view() != "re:" + text ||
            (bytes > 0 && (ra->payloads.size() != 1 || ra->payloads[0].size() != bytes))) {
          failures++;
        }
      }
    });
  }
  // Callbacks completed on the I/O thread, alongside the waiting threads.
  std::atomic<int> callbacks{0};
  absl::Notification all_done;
  for (int i = 0; i < 100; ++i) {
    client->Call(peer, Text(absl::StrCat("cb", i)), absl::Now() + absl::Seconds(20))
        .OnDone([&, i](const absl::StatusOr<Message>& m) {
          if (!m.ok() || m->header.view() != absl::StrCat("re:cb", i)) failures++;
          if (++callbacks == 100) all_done.Notify();
        });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(failures.load(), 0);
  client->Stop();
}

TEST_P(ZmqTransportTest, WaiterOnASilentPeerEndsAtTheDeadlineWhileOthersProceed) {
  auto silent = NewNode();
  auto silent_ep = silent->Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(silent_ep.ok());
  ASSERT_TRUE(silent->Start([](RpcRequest&&) {}).ok());
  Echo echo(/*defer_every=*/0, caller_driven());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId quiet = client->Connect(*silent_ep);
  PeerId loud = client->Connect(echo.endpoint());
  std::thread waiter([&] {
    auto r = client->Call(quiet, Text("x"), absl::Now() + absl::Milliseconds(300)).Wait();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  });
  for (int i = 0; i < 50; ++i) {
    auto r = client->Call(loud, Text("y"), absl::Now() + absl::Seconds(10)).Wait();
    ASSERT_TRUE(r.ok()) << r.status();
  }
  waiter.join();
  client->Stop();
  silent->Stop();
}

// With the fast path on, the waiter is a guest of the client's loop.
TEST_P(ZmqTransportTest, StopEndsAWaitWithCancelled) {
  auto silent = NewNode();
  auto ep = silent->Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(ep.ok());
  ASSERT_TRUE(silent->Start([](RpcRequest&&) {}).ok());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(*ep);
  RpcFuture f = client->Call(peer, Text("x"), absl::Now() + absl::Seconds(30));
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    client->Stop();
  });
  absl::Time start = absl::Now();
  auto r = f.Wait();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  stopper.join();
  silent->Stop();
}

TEST_P(ZmqTransportTest, RequestNobodyWaitsForStillLeaves) {
  auto server = NewNode();
  auto ep = server->Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(ep.ok());
  std::atomic<int> got{0};
  ASSERT_TRUE(server->Start([&](RpcRequest&&) { got++; }).ok());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(*ep);
  absl::SleepFor(absl::Milliseconds(50));  // connected, so the send does not fail
  std::vector<RpcFuture> futures;
  for (int i = 1; i <= 3; ++i) {
    // Held back (no one waits), yet each must reach the server on its own.
    futures.push_back(client->Call(peer, Text("fire and forget"), absl::Now() + absl::Seconds(10)));
    absl::Time until = absl::Now() + absl::Seconds(2);
    while (got.load() < i && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(got.load(), i);
    absl::SleepFor(absl::Milliseconds(250));  // the I/O thread goes back to long waits
  }
  client->Stop();
  server->Stop();
}

TEST_P(ZmqTransportTest, CallsMadeFromAHandlerAreSentAndAnswered) {
  Echo echo(/*defer_every=*/0, caller_driven());
  // A relay: each request it gets is forwarded to the echo server from its
  // I/O thread, and answered with the echo's reply.
  auto relay = NewNode();
  auto relay_ep = relay->Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(relay_ep.ok());
  RpcNode* r = relay.get();
  PeerId to_echo = kNoPeer;
  ASSERT_TRUE(relay
                  ->Start([r, &to_echo](RpcRequest&& req) {
                    std::string route = req.route;
                    uint64_t id = req.id;
                    r->Call(to_echo, std::move(req.message), absl::Now() + absl::Seconds(10))
                        .OnDone([r, route, id](const absl::StatusOr<Message>& m) {
                          r->Reply(route, id, m.ok() ? *m : Text("error"));
                        });
                  })
                  .ok());
  to_echo = relay->Connect(echo.endpoint());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(*relay_ep);
  for (int i = 0; i < 50; ++i) {
    auto m = client->Call(peer, Text(absl::StrCat("r", i)), absl::Now() + absl::Seconds(10)).Wait();
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->header.view(), absl::StrCat("re:r", i));
  }
  client->Stop();
  relay->Stop();
}

// One connection, read by a waiting thread (a guest, with the fast path on)
// and by the I/O thread (for replies nobody waits for) in turn: every
// reply is delivered exactly once.
TEST_P(ZmqTransportTest, GuestAndIoThreadSharingAConnectionDeliverEachReplyOnce) {
  Echo server(/*defer_every=*/5, caller_driven());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(server.endpoint());
  constexpr int kWaited = 400, kCallbacks = 400;
  std::atomic<int> failures{0}, callbacks{0};
  absl::Notification all_called;
  std::thread waiter([&] {
    for (int i = 0; i < kWaited; ++i) {
      auto r = client->Call(peer, Text(absl::StrCat("w", i)), absl::Now() + absl::Seconds(20)).Wait();
      if (!r.ok() || r->header.view() != absl::StrCat("re:w", i)) failures++;
    }
  });
  for (int i = 0; i < kCallbacks; ++i) {
    client->Call(peer, Text(absl::StrCat("c", i)), absl::Now() + absl::Seconds(20))
        .OnDone([&, i](const absl::StatusOr<Message>& m) {
          if (!m.ok() || m->header.view() != absl::StrCat("re:c", i)) failures++;
          if (++callbacks == kCallbacks) all_called.Notify();
        });
    if (i % 16 == 0) absl::SleepFor(absl::Microseconds(300));
  }
  waiter.join();
  ASSERT_TRUE(all_called.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client->stats().stale_responses, 0u);  // none delivered twice
  EXPECT_EQ(client->transport().stats().messages_received,
            static_cast<uint64_t>(kWaited + kCallbacks));
  client->Stop();
}

INSTANTIATE_TEST_SUITE_P(Modes, ZmqTransportTest, ::testing::Bool(), [](const auto& info) {
  return info.param ? "CallerDriven" : "SingleOwner";
});

// A message of many payloads (a pull reply's shape: slices of one
// allocation, small ones of their own, empty ones) travels packed in a few
// frames and arrives as the same payloads, byte for byte, in order.
TEST_P(ZmqTransportTest, ManyPayloadsArriveIntactAndInOrder) {
  Echo server(/*defer_every=*/0, caller_driven());
  auto client = NewNode();
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(server.endpoint());
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Message m = Text(absl::StrCat("many", round));
    uint8_t* whole = nullptr;
    Buffer rows = Buffer::Allocate(1 << 20, &whole);
    for (size_t i = 0; i < rows.size(); ++i) whole[i] = static_cast<uint8_t>(rng());
    size_t offset = 0;
    for (int p = 0; p < 60; ++p) {
      const size_t size = rng() % 4 == 0 ? 0 : 8 * (1 + rng() % 3000);
      if (p % 2 == 0 && offset + size <= rows.size()) {
        m.payloads.push_back(rows.Slice(offset, size));
        offset += size + 8 * (rng() % 3);
      } else {
        m.payloads.push_back(Buffer::FromString(std::string(size + rng() % 5, 'a' + p % 26)));
      }
    }
    const std::vector<Buffer> sent = m.payloads;
    auto reply = client->Call(peer, std::move(m), absl::Now() + absl::Seconds(20)).Wait();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_EQ(reply->payloads.size(), sent.size());
    for (size_t p = 0; p < sent.size(); ++p) {
      ASSERT_EQ(reply->payloads[p].view(), sent[p].view()) << "round " << round << " payload " << p;
    }
  }
  client->Stop();
}

// Fast path off: replies are received and completed by the I/O thread
// alone, never by the thread that waits.
TEST(ZmqTransport, SingleOwnerModeCompletesCallsOnTheIoThread) {
  Echo server(/*defer_every=*/1, /*caller_driven_io=*/false);  // replies come late
  auto client = Node(/*caller_driven_io=*/false);
  ASSERT_TRUE(client->Start(nullptr).ok());
  PeerId peer = client->Connect(server.endpoint());
  int checked = 0;
  for (int i = 0; i < 20; ++i) {
    RpcFuture f = client->Call(peer, Text("x"), absl::Now() + absl::Seconds(10));
    std::atomic<bool> registering{true};
    bool skip = false;
    std::thread::id completed_on;
    absl::Notification called;
    f.OnDone([&](const absl::StatusOr<Message>&) {
      skip = registering.load();  // done before OnDone: ran right here
      completed_on = std::this_thread::get_id();
      called.Notify();
    });
    registering = false;
    ASSERT_TRUE(f.Wait().ok());
    ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(10)));
    if (skip) continue;
    EXPECT_NE(completed_on, std::this_thread::get_id());
    ++checked;
  }
  EXPECT_GT(checked, 0);
  client->Stop();
}

}  // namespace
}  // namespace pstrain
