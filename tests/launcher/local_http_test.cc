#include "launcher/local_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::launcher {
namespace {

int EphemeralLow() {
  int low = 32768, high = 0;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  return low;
}

// A socket bound to 127.0.0.1:port (0: any); -1 when the port is taken.
int Bind(int port, int* got = nullptr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  if (got != nullptr) *got = ntohs(addr.sin_port);
  return fd;
}

std::vector<int> All(const LocalHttpPorts& p) {
  std::vector<int> all = {p.dashboard, p.coordinator_metrics};
  all.insert(all.end(), p.server_metrics.begin(), p.server_metrics.end());
  all.insert(all.end(), p.worker_metrics.begin(), p.worker_metrics.end());
  return all;
}

// The ports are distinct and free, and none can be handed to a process of
// the job that binds port 0 (its RPC socket): a server once failed to start
// because the coordinator's RPC port, bound after the HTTP ports were picked
// and released, was one of them.
TEST(LocalHttpPorts, DistinctFreeAndNeverWhereABindToPortZeroLands) {
  auto ports = PickLocalHttpPorts(3, 4, /*metrics=*/true, /*dashboard=*/true, 0);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const std::vector<int> all = All(*ports);
  ASSERT_EQ(all.size(), 9u);
  EXPECT_EQ(std::set<int>(all.begin(), all.end()).size(), all.size());
  const int low = EphemeralLow();
  for (int port : all) {
    EXPECT_GT(port, 0);
    if (low > 10000 + 64 * 9) EXPECT_LT(port, low) << "inside the ephemeral range";
    const int fd = Bind(port);
    EXPECT_GE(fd, 0) << "port " << port << " is not free";
    if (fd >= 0) close(fd);
  }
  // Many binds to port 0 (the job's RPC sockets) never get one of them.
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) {
    int got = 0;
    const int fd = Bind(0, &got);
    ASSERT_GE(fd, 0);
    held.push_back(fd);
    for (int port : all) ASSERT_NE(got, port) << "a bind to port 0 got an HTTP port";
  }
  for (int fd : held) close(fd);
}

TEST(LocalHttpPorts, AGivenDashboardPortIsKeptAndNothingIsPickedWithoutMetrics) {
  auto ports = PickLocalHttpPorts(2, 2, /*metrics=*/false, /*dashboard=*/true, 8765);
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(ports->dashboard, 8765);
  EXPECT_EQ(ports->coordinator_metrics, 0);
  EXPECT_TRUE(ports->server_metrics.empty());
  EXPECT_TRUE(ports->worker_metrics.empty());
}

}  // namespace
}  // namespace pstrain::launcher
