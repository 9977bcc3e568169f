// Random bytes thrown at a running coordinator's and server's ports (raw TCP
// and well-framed ZeroMQ messages with garbage inside) leave them running
// and answering.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rpc.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

int PortOf(const std::string& endpoint) {
  int port = 0;
  (void)absl::SimpleAtoi(endpoint.substr(endpoint.rfind(':') + 1), &port);
  return port;
}

void SendRawTcp(int port, std::mt19937_64& rng) {
  for (int conn = 0; conn < 20; ++conn) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      std::string junk(1 + rng() % 4096, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      if (conn % 4 == 0) junk[0] = static_cast<char>(0xff);  // looks like a ZMTP greeting start
      (void)!write(fd, junk.data(), junk.size());
    }
    close(fd);
  }
}

void SendGarbageZmq(const std::string& endpoint, std::mt19937_64& rng) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  for (int i = 0; i < 300; ++i) {
    int frames = 1 + rng() % 5;
    for (int f = 0; f < frames; ++f) {
      std::string junk(rng() % 200, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      if (f == 0 && i % 3 == 0 && junk.size() >= 16) {
        // A valid envelope in front of a garbage header.
        Envelope env;
        std::memcpy(junk.data(), &env, sizeof(env));
        junk.resize(sizeof(env));
      }
      s.send(zmq::buffer(junk), f + 1 < frames ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  // Packed messages (frame_pack.h) whose layout is well-sized but points
  // anywhere: the payload count, frame numbers, offsets and sizes are random.
  for (int i = 0; i < 100; ++i) {
    Envelope env;
    env.reserved[0] = 2;  // the packed flag
    s.send(zmq::buffer(&env, sizeof(env)), zmq::send_flags::sndmore);
    s.send(zmq::str_buffer("not a header"), zmq::send_flags::sndmore);
    const uint32_t count = 1 + rng() % 8;
    std::vector<uint64_t> layout(1 + 3 * count);
    layout[0] = count;
    for (uint32_t k = 0; k < count; ++k) {
      layout[1 + 3 * k] = rng() % 4;                     // frame
      layout[2 + 3 * k] = i % 2 ? rng() % 512 : rng();   // offset
      layout[3 + 3 * k] = i % 3 ? rng() % 512 : rng();   // size
    }
    const int data_frames = static_cast<int>(rng() % 3);
    s.send(zmq::buffer(layout), data_frames > 0 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    for (int f = 0; f < data_frames; ++f) {
      std::string junk(rng() % 600, 'x');
      s.send(zmq::buffer(junk), f + 1 < data_frames ? zmq::send_flags::sndmore
                                                     : zmq::send_flags::none);
    }
  }
  absl::SleepFor(absl::Milliseconds(300));
}

absl::Status Ping(const std::string& endpoint) {
  RpcNode node(std::make_unique<ZmqTransport>(ZmqTransportOptions{}));
  if (absl::Status st = node.Start(nullptr); !st.ok()) return st;
  PeerId p = node.Connect(endpoint);
  proto::Header h;
  h.type = proto::MsgType::kPing;
  auto reply = node.Call(p, proto::EncodeHeaderOnly(h), absl::Now() + absl::Seconds(10)).Wait();
  return proto::DecodeReply(std::move(reply), "ping").status();
}

TEST(HostileBytes, CoordinatorAndServerSurviveRandomBytesAndStillAnswer) {
  std::string dir = MakeTempDir("pstrain-it");
  TestProcess coordinator("pstrain_coordinator",
                          {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + dir + "/coord",
                           "--servers=1", "--workers=1"},
                          dir + "/coordinator.log");
  std::string coord = WaitForFileLine(dir + "/coord", absl::Seconds(20));
  ASSERT_FALSE(coord.empty());
  int server_port = FreePort();
  std::string server_ep = absl::StrCat("tcp://127.0.0.1:", server_port);
  TestProcess server("pstrain_server", {"--coordinator=" + coord, "--bind=" + server_ep},
                     dir + "/server.log");
  ASSERT_TRUE(Ping(server_ep).ok());
  std::mt19937_64 rng(1234);
  for (const std::string& ep : {coord, server_ep}) {
    SendRawTcp(PortOf(ep), rng);
    SendGarbageZmq(ep, rng);
  }
  EXPECT_TRUE(coordinator.running()) << coordinator.Log();
  EXPECT_TRUE(server.running()) << server.Log();
  EXPECT_TRUE(Ping(coord).ok()) << coordinator.Log();
  EXPECT_TRUE(Ping(server_ep).ok()) << server.Log();
}

}  // namespace
}  // namespace pstrain::testing
