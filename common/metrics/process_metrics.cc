#include "common/metrics/process_metrics.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain::metrics {

ProcessUsage ReadProcessUsage() {
  ProcessUsage u;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
      buf[n] = '\0';
      unsigned long long pages_virtual = 0, pages_resident = 0;
      if (std::sscanf(buf, "%llu %llu", &pages_virtual, &pages_resident) == 2) {
        uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        u.virtual_bytes = pages_virtual * page;
        u.resident_bytes = pages_resident * page;
      }
    }
  }
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    u.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  }
  return u;
}

void RegisterProcessMetrics(Registry* registry) {
  Gauge* resident = registry->GetGauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  Gauge* virt = registry->GetGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
  Counter* cpu = registry->GetCounter("process_cpu_seconds_total",
                                      "Total user and system CPU time spent in seconds.");
  Gauge* start = registry->GetGauge("process_start_time_seconds",
                                    "Start time of the process since unix epoch in seconds.");
  start->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  registry->AddScrapeHook([resident, virt, cpu] {
    ProcessUsage u = ReadProcessUsage();
    resident->Set(static_cast<double>(u.resident_bytes));
    virt->Set(static_cast<double>(u.virtual_bytes));
    cpu->SetTotal(u.cpu_seconds);
  });
}

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace pstrain::metrics
