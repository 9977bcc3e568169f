#include "launcher/local_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/supervisor.h"

namespace pstrain::launcher {
namespace {

constexpr char kHost[] = "127.0.0.1";

// Binds `count` sockets to 127.0.0.1:0 and returns their ports.
absl::StatusOr<std::vector<int>> FreePorts(int count) {
  std::vector<int> fds, ports;
  absl::Status failure;
  for (int i = 0; i < count && failure.ok(); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      failure = ErrnoToStatus(errno, "socket");
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      failure = ErrnoToStatus(errno, "pick a free port on 127.0.0.1");
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
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
