// The HTTP ports `pstrain local` gives its processes: a /metrics port for
// every process (--metrics) and the coordinator's dashboard
// (--dashboard / --dashboard_port), all on 127.0.0.1.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

struct LocalHttpPorts {
  int dashboard = 0;            // 0: no dashboard
  int coordinator_metrics = 0;  // 0: no /metrics anywhere
  std::vector<int> server_metrics;  // by rank; empty without --metrics
  std::vector<int> worker_metrics;
};

// Free ports picked at once (all sockets held until every port is known, so
// none repeats), below the kernel's ephemeral range where there is room, so
// that no process of the job binding port 0 can be given one of them;
// `dashboard_port` > 0 is used as given.
absl::StatusOr<LocalHttpPorts> PickLocalHttpPorts(int servers, int workers, bool metrics,
                                                  bool dashboard, int dashboard_port);

// "--metrics_port=P" (and the coordinator's "--dashboard_port=P") plus
// "--http_host=127.0.0.1" for one process; empty when it serves nothing.
std::vector<std::string> CoordinatorHttpArgs(const LocalHttpPorts& ports);
std::vector<std::string> NodeHttpArgs(const std::vector<int>& ports, int rank);

// Prints where the dashboard and the metrics are ("[pstrain] ..." lines).
void AnnounceHttpPorts(const LocalHttpPorts& ports);

}  // namespace pstrain::launcher
