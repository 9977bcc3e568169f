#include "launcher/local_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/supervisor.h"

namespace pstrain::launcher {
namespace {

constexpr char kHost[] = "127.0.0.1";

// The first of the kernel's ephemeral ports
// (/proc/sys/net/ipv4/ip_local_port_range), where a bind to port 0 lands;
// Linux's default when unreadable.
int EphemeralLow() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int l = 0, h = 0;
    if (std::fscanf(f, "%d %d", &l, &h) == 2 && l > 0 && l <= h) low = l;
    std::fclose(f);
  }
  return low;
}

// Binds a socket to 127.0.0.1:`port` (0: any) and returns it with the port
// it got; -1 and the error when the port is taken.
std::pair<int, int> BindLoopback(int port, absl::Status* error) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = ErrnoToStatus(errno, "socket");
    return {-1, 0};
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = ErrnoToStatus(errno, "pick a free port on 127.0.0.1");
    close(fd);
    return {-1, 0};
  }
  return {fd, ntohs(addr.sin_port)};
}

// `count` distinct free ports on 127.0.0.1. They are released before the
// processes bind them, so they come from below the ephemeral range when
// there is room: every other socket of the job (the coordinator's and the
// nodes' RPC ports bind port 0) gets an ephemeral port, which then can never
// be one of these (it could, and a server then failed to start with "cannot
// listen ... port in use", when these came from port 0 too). The sockets are
// held until every port is known, so none repeats.
absl::StatusOr<std::vector<int>> FreePorts(int count) {
  std::vector<int> fds, ports;
  absl::Status failure;
  const int low = EphemeralLow();
  constexpr int kFirst = 10000;  // above the ports services are usually given
  if (low - kFirst >= 64 * count) {
    // Start at a random-ish place so that concurrent launches rarely probe
    // the same ports; a taken port is skipped.
    const int span = low - kFirst;
    const int offset = static_cast<int>((static_cast<unsigned>(getpid()) * 2654435761u) %
                                        static_cast<unsigned>(span));
    for (int i = 0; i < span && static_cast<int>(ports.size()) < count; ++i) {
      absl::Status taken;  // a port in use: the next one
      const auto [fd, port] = BindLoopback(kFirst + (offset + i) % span, &taken);
      if (fd < 0) continue;
      fds.push_back(fd);
      ports.push_back(port);
    }
  }
  // No room below the range (or every port there taken): any free port.
  while (static_cast<int>(ports.size()) < count && failure.ok()) {
    const auto [fd, port] = BindLoopback(0, &failure);
    if (fd < 0) break;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  if (!failure.ok()) return failure;
  return ports;
}

std::string Url(int port, const char* path) { return absl::StrCat("http://", kHost, ":", port, path); }

}  // namespace

absl::StatusOr<LocalHttpPorts> PickLocalHttpPorts(int servers, int workers, bool metrics,
                                                  bool dashboard, int dashboard_port) {
  LocalHttpPorts p;
  int need = (metrics ? 1 + servers + workers : 0) + (dashboard && dashboard_port <= 0 ? 1 : 0);
  PS_ASSIGN_OR_RETURN(std::vector<int> free, FreePorts(need));
  size_t next = 0;
  if (dashboard_port > 0) {
    p.dashboard = dashboard_port;
  } else if (dashboard) {
    p.dashboard = free[next++];
  }
  if (metrics) {
    p.coordinator_metrics = free[next++];
    for (int s = 0; s < servers; ++s) p.server_metrics.push_back(free[next++]);
    for (int w = 0; w < workers; ++w) p.worker_metrics.push_back(free[next++]);
  }
  return p;
}

std::vector<std::string> CoordinatorHttpArgs(const LocalHttpPorts& ports) {
  std::vector<std::string> a;
  if (ports.dashboard > 0) a.push_back(absl::StrCat("--dashboard_port=", ports.dashboard));
  if (ports.coordinator_metrics > 0) a.push_back(absl::StrCat("--metrics_port=", ports.coordinator_metrics));
  if (!a.empty()) a.push_back(absl::StrCat("--http_host=", kHost));
  return a;
}

std::vector<std::string> NodeHttpArgs(const std::vector<int>& ports, int rank) {
  if (rank < 0 || rank >= static_cast<int>(ports.size())) return {};
  return {absl::StrCat("--metrics_port=", ports[rank]), absl::StrCat("--http_host=", kHost)};
}

void AnnounceHttpPorts(const LocalHttpPorts& ports) {
  if (ports.dashboard > 0) Supervisor::Say("dashboard: " + Url(ports.dashboard, "/"));
  if (ports.coordinator_metrics <= 0) return;
  std::string line = "metrics: coordinator " + Url(ports.coordinator_metrics, "/metrics");
  for (size_t s = 0; s < ports.server_metrics.size(); ++s) {
    absl::StrAppend(&line, ", server ", s, " ", Url(ports.server_metrics[s], "/metrics"));
  }
  for (size_t w = 0; w < ports.worker_metrics.size(); ++w) {
    absl::StrAppend(&line, ", worker ", w, " ", Url(ports.worker_metrics[w], "/metrics"));
  }
  Supervisor::Say(line);
}

}  // namespace pstrain::launcher
