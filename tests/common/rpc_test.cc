#include "common/rpc.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/inproc_transport.h"
#include "common/zmq_transport.h"

namespace pstrain {
namespace {

Message TextMessage(const std::string& header, std::vector<std::string> payloads = {}) {
  Message m;
  m.header = Buffer::FromString(std::string(header));
  for (auto& p : payloads) m.payloads.push_back(Buffer::FromString(std::move(p)));
  return m;
}

// A server that echoes every request with "re:" prepended to the header and
// the payloads returned unchanged.
void StartEcho(RpcNode& node) {
  ASSERT_TRUE(node.Start([&node](RpcRequest&& req) {
                    Message reply;
                    reply.header = Buffer::FromString(absl::StrCat("re:", req.message.header.view()));
                    reply.payloads = req.message.payloads;
                    node.Reply(req, std::move(reply));
                  })
                  .ok());
}

// kZmqSingleOwner: ZeroMQ with the caller-driven fast path off.
enum class Kind { kInProc, kZmq, kZmqSingleOwner };

class RpcTest : public ::testing::TestWithParam<Kind> {
 protected:
  std::unique_ptr<Transport> MakeTransport() {
    if (GetParam() == Kind::kInProc) return std::make_unique<InProcTransport>(&network_);
    ZmqTransportOptions options;
    options.caller_driven_io = GetParam() == Kind::kZmq;
    return std::make_unique<ZmqTransport>(options);
  }
  std::string Endpoint(const std::string& name) {
    return GetParam() == Kind::kInProc ? name : "tcp://127.0.0.1:0";
  }
  InProcNetwork network_;
};

TEST_P(RpcTest, CallReturnsTheServersReplyWithPayloads) {
  RpcNode server(MakeTransport());
  auto ep = server.Bind(Endpoint("server"));
  ASSERT_TRUE(ep.ok()) << ep.status();
  StartEcho(server);
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  PeerId peer = client.Connect(*ep);
  std::string big(1 << 20, 'x');
  RpcFuture f = client.Call(peer, TextMessage("hello", {"a", big}), absl::Now() + absl::Seconds(10));
  absl::StatusOr<Message> reply = f.Wait();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.view(), "re:hello");
  ASSERT_EQ(reply->payloads.size(), 2u);
  EXPECT_EQ(reply->payloads[0].view(), "a");
  EXPECT_EQ(reply->payloads[1].view(), big);
}

TEST_P(RpcTest, ManyConcurrentCallsAreMatchedToTheirReplies) {
  RpcNode server(MakeTransport());
  auto ep = server.Bind(Endpoint("server"));
  ASSERT_TRUE(ep.ok());
  StartEcho(server);
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  PeerId peer = client.Connect(*ep);
  std::vector<RpcFuture> futures;
  for (int i = 0; i < 200; ++i) {
    futures.push_back(client.Call(peer, TextMessage(absl::StrCat(i)), absl::Now() + absl::Seconds(10)));
  }
  for (int i = 0; i < 200; ++i) {
    auto r = futures[i].Wait();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->header.view(), absl::StrCat("re:", i));
  }
}

TEST_P(RpcTest, CallToSilentPeerEndsWithDeadlineExceeded) {
  RpcNode server(MakeTransport());
  auto ep = server.Bind(Endpoint("server"));
  ASSERT_TRUE(ep.ok());
  ASSERT_TRUE(server.Start([](RpcRequest&&) {}).ok());  // never replies
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  PeerId peer = client.Connect(*ep);
  absl::Time start = absl::Now();
  auto r = client.Call(peer, TextMessage("x"), absl::Now() + absl::Milliseconds(150)).Wait();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_P(RpcTest, CallToAbsentPeerEndsWithUnavailableAtTheDeadline) {
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  PeerId peer = client.Connect(GetParam() == Kind::kInProc ? "nobody" : "tcp://127.0.0.1:1");
  auto r = client.Call(peer, TextMessage("x"), absl::Now() + absl::Milliseconds(200)).Wait();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST_P(RpcTest, RequestSentBeforeTheServerStartsIsDeliveredOnceItDoes) {
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  std::string ep;
  std::unique_ptr<RpcNode> server;
  if (GetParam() == Kind::kInProc) {
    ep = "late-server";
  } else {
    // Find a free port, then release it for the late server.
    RpcNode probe(MakeTransport());
    auto e = probe.Bind("tcp://127.0.0.1:0");
    ASSERT_TRUE(e.ok());
    ep = *e;
  }
  PeerId peer = client.Connect(ep);
  RpcFuture f = client.Call(peer, TextMessage("early"), absl::Now() + absl::Seconds(10));
  absl::SleepFor(absl::Milliseconds(100));
  server = std::make_unique<RpcNode>(MakeTransport());
  ASSERT_TRUE(server->Bind(ep).ok());
  StartEcho(*server);
  auto r = f.Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.view(), "re:early");
}

TEST_P(RpcTest, OnDoneRunsAfterCompletion) {
  RpcNode server(MakeTransport());
  auto ep = server.Bind(Endpoint("server"));
  ASSERT_TRUE(ep.ok());
  StartEcho(server);
  RpcNode client(MakeTransport());
  ASSERT_TRUE(client.Start(nullptr).ok());
  PeerId peer = client.Connect(*ep);
  absl::Notification done;
  std::string got;
  client.Call(peer, TextMessage("cb"), absl::Now() + absl::Seconds(10))
      .OnDone([&](const absl::StatusOr<Message>& m) {
        got = std::string(m->header.view());
        done.Notify();
      });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(got, "re:cb");
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcTest,
                         ::testing::Values(Kind::kInProc, Kind::kZmq, Kind::kZmqSingleOwner),
                         [](const auto& info) {
                           switch (info.param) {
                             case Kind::kInProc:
                               return "InProc";
                             case Kind::kZmq:
                               return "Zmq";
                             case Kind::kZmqSingleOwner:
                               return "ZmqSingleOwner";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace pstrain
