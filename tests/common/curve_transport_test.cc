// ZmqTransport with CURVE: nodes holding the cluster's keys talk; a client
// without keys, or with a key that is not authorized, gets no connection at
// all (its calls end at their deadline, the server's handler never sees
// them) and the server logs the refusal. And the per-peer bound on held
// requests: a peer over it is refused while another is still served.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc.h"
#include "common/security/curve_keys.h"
#include "common/zmq_transport.h"

namespace pstrain {
namespace {

Message Text(const std::string& header, size_t payload_bytes = 0) {
  Message m;
  m.header = Buffer::FromString(std::string(header));
  if (payload_bytes > 0) m.payloads.push_back(Buffer::FromString(std::string(payload_bytes, 'p')));
  return m;
}

std::unique_ptr<RpcNode> Node(const CurveKeys& keys, int64_t max_peer_inflight_bytes = 0) {
  ZmqTransportOptions o;
  o.name = "test";
  o.curve = keys;
  if (max_peer_inflight_bytes > 0) o.limits.max_peer_inflight_bytes = max_peer_inflight_bytes;
  return std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(o));
}

// An echo server; requests whose header is "hold" are kept unanswered
// until Release().
class Server {
 public:
  explicit Server(const CurveKeys& keys, int64_t max_peer_inflight_bytes = 0)
      : node_(Node(keys, max_peer_inflight_bytes)) {
    auto ep = node_->Bind("tcp://127.0.0.1:0");
    EXPECT_TRUE(ep.ok()) << ep.status();
    endpoint_ = ep.value_or("");
    EXPECT_TRUE(node_->Start([this](RpcRequest&& req) {
                  absl::MutexLock lock(&mu_);
                  ++handled_;
                  if (req.message.header.view() == "hold") {
                    held_.push_back(std::move(req));
                    return;
                  }
                  node_->Reply(req, Text(absl::StrCat("re:", req.message.header.view())));
                }).ok());
  }
  ~Server() { node_->Stop(); }
  const std::string& endpoint() const { return endpoint_; }
  int handled() {
    absl::MutexLock lock(&mu_);
    return handled_;
  }
  size_t held() {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  // Answers the held requests and lets go of them.
  void Release() {
    std::vector<RpcRequest> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (RpcRequest& r : held) node_->Reply(r.route, r.id, Text("released"));
  }
  TransportStats stats() { return node_->transport().stats(); }

 private:
  std::unique_ptr<RpcNode> node_;
  std::string endpoint_;
  absl::Mutex mu_;
  int handled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<RpcRequest> held_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<Message> Call(RpcNode& client, const std::string& endpoint, const std::string& text,
                             absl::Duration timeout, size_t payload = 0) {
  PeerId p = client.Connect(endpoint);
  return client.Call(p, Text(text, payload), absl::Now() + timeout).Wait();
}

class CurveTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pstrain-curve-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(WriteKeys({dir_, "", false}).ok());
    auto keys = LoadCurveKeys(dir_);
    ASSERT_TRUE(keys.ok()) << keys.status();
    cluster_ = *keys;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  CurveKeys cluster_;
};

TEST_F(CurveTransport, NodesWithTheClusterKeysExchangeMessages) {
  Server server(cluster_);
  auto client = Node(cluster_);
  ASSERT_TRUE(client->Start(nullptr).ok());
  for (int i = 0; i < 20; ++i) {
    auto reply = Call(*client, server.endpoint(), absl::StrCat("m", i), absl::Seconds(10), 1000);
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.view(), absl::StrCat("re:m", i));
  }
  EXPECT_EQ(server.stats().auth_refused, 0u);
  client->Stop();
}

TEST_F(CurveTransport, ClientWithoutKeysGetsNoReplyAndReachesNoHandler) {
  Server server(cluster_);
  auto outsider = Node(CurveKeys{});
  ASSERT_TRUE(outsider->Start(nullptr).ok());
  auto reply = Call(*outsider, server.endpoint(), "hello", absl::Seconds(1.5));
  EXPECT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().code() == absl::StatusCode::kUnavailable ||
              reply.status().code() == absl::StatusCode::kDeadlineExceeded)
      << reply.status();
  EXPECT_EQ(server.handled(), 0);
  outsider->Stop();
  // The server still serves its own cluster.
  auto member = Node(cluster_);
  ASSERT_TRUE(member->Start(nullptr).ok());
  EXPECT_TRUE(Call(*member, server.endpoint(), "hi", absl::Seconds(10)).ok());
  member->Stop();
}

TEST_F(CurveTransport, ClientWithAnUnlistedKeyIsRefusedAndTheServerLogsIt) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    Server server(cluster_);
    auto pair = GenerateCurveKeyPair();
    ASSERT_TRUE(pair.ok()) << pair.status();
    CurveKeys stranger;
    stranger.public_key = pair->public_key;
    stranger.secret_key = pair->secret_key;
    stranger.server_key = cluster_.public_key;  // it knows the server, but is not known
    auto outsider = Node(stranger);
    ASSERT_TRUE(outsider->Start(nullptr).ok());
    auto reply = Call(*outsider, server.endpoint(), "hello", absl::Seconds(1.5));
    EXPECT_FALSE(reply.ok());
    EXPECT_TRUE(reply.status().code() == absl::StatusCode::kUnavailable ||
                reply.status().code() == absl::StatusCode::kDeadlineExceeded)
        << reply.status();
    EXPECT_EQ(server.handled(), 0);
    EXPECT_GE(server.stats().auth_refused, 1u);
    outsider->Stop();
    std::string log = absl::StrJoin(sink->last_formatted(), "");
    EXPECT_TRUE(absl::StrContains(log, "refused a connection from 127.0.0.1")) << log;
    EXPECT_TRUE(absl::StrContains(log, pair->public_key)) << log;
  }
  spdlog::set_default_logger(previous);
}

TEST_F(CurveTransport, ClientKeyPairFromKeygenIsAdmitted) {
  ASSERT_TRUE(WriteKeys({dir_, "probe", false}).ok());
  auto keys = LoadCurveKeys(dir_);  // authorized_keys now lists the probe
  ASSERT_TRUE(keys.ok());
  Server server(*keys);
  auto probe_keys = LoadCurveKeys(dir_, "probe");
  ASSERT_TRUE(probe_keys.ok()) << probe_keys.status();
  auto probe = Node(*probe_keys);
  ASSERT_TRUE(probe->Start(nullptr).ok());
  auto reply = Call(*probe, server.endpoint(), "ping", absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.view(), "re:ping");
  probe->Stop();
}

TEST(CurveTransportConfig, BindWithABadKeyFailsNamingIt) {
  CurveKeys bad;
  bad.public_key = "too short";
  bad.secret_key = "too short";
  bad.server_key = "too short";
  auto node = Node(bad);
  auto ep = node->Bind("tcp://127.0.0.1:0");
  EXPECT_EQ(ep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ep.status().message(), "public key")) << ep.status();
}

TEST(PeerBudget, PeerOverTheBoundIsRefusedWhileAnotherIsServed) {
  constexpr size_t kPayload = 400 << 10;
  Server server(CurveKeys{}, /*max_peer_inflight_bytes=*/1 << 20);
  auto a = Node(CurveKeys{});
  auto b = Node(CurveKeys{});
  ASSERT_TRUE(a->Start(nullptr).ok());
  ASSERT_TRUE(b->Start(nullptr).ok());
  PeerId pa = a->Connect(server.endpoint());
  // A parks two requests (800 KiB) on the server...
  RpcFuture h1 = a->Call(pa, Text("hold", kPayload), absl::Now() + absl::Seconds(30));
  RpcFuture h2 = a->Call(pa, Text("hold", kPayload), absl::Now() + absl::Seconds(30));
  absl::Time until = absl::Now() + absl::Seconds(10);
  while (server.held() < 2 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(server.held(), 2u);
  // ...so its third would pass 1 MiB: dropped, never handled.
  auto over = a->Call(pa, Text("echo", kPayload), absl::Now() + absl::Seconds(1)).Wait();
  EXPECT_EQ(over.status().code(), absl::StatusCode::kDeadlineExceeded) << over.status();
  EXPECT_EQ(server.stats().dropped_over_budget, 1u);
  EXPECT_EQ(server.handled(), 2);
  // Another peer is still served, with the same request.
  auto other = Call(*b, server.endpoint(), "echo", absl::Seconds(10), kPayload);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->header.view(), "re:echo");
  // Once the server lets go of A's requests, A is served again.
  server.Release();
  EXPECT_TRUE(h1.Wait().ok());
  EXPECT_TRUE(h2.Wait().ok());
  auto again = a->Call(pa, Text("echo", kPayload), absl::Now() + absl::Seconds(10)).Wait();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->header.view(), "re:echo");
  a->Stop();
  b->Stop();
}

TEST(PeerBudget, MessageOverTheSizeLimitIsDropped) {
  ZmqTransportOptions o;
  o.limits.max_message_bytes = 64 << 10;
  RpcNode server(std::make_unique<ZmqTransport>(o));
  auto ep = server.Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(ep.ok());
  std::atomic<int> handled{0};
  ASSERT_TRUE(server
                  .Start([&](RpcRequest&& req) {
                    ++handled;
                    server.Reply(req, Text("ok"));
                  })
                  .ok());
  auto client = Node(CurveKeys{});
  ASSERT_TRUE(client->Start(nullptr).ok());
  auto big = Call(*client, *ep, "big", absl::Seconds(1), 100 << 10);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kDeadlineExceeded) << big.status();
  EXPECT_TRUE(Call(*client, *ep, "small", absl::Seconds(10), 1 << 10).ok());
  EXPECT_EQ(handled.load(), 1);
  EXPECT_GE(server.transport().stats().dropped_malformed, 1u);
  client->Stop();
  server.Stop();
}

}  // namespace
}  // namespace pstrain
