// What a process knows about itself: memory from /proc/self/statm, CPU time
// from getrusage, start time; and the standard process_* metrics built on
// them (the names Prometheus client libraries use).
#pragma once

#include <cstdint>

#include "common/metrics/registry.h"

namespace pstrain::metrics {

struct ProcessUsage {
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  double cpu_seconds = 0;  // user + system, all threads
};

// Reads the calling process's usage (a few system calls: call it at most a
// few times a second). Zeros where the system does not tell.
ProcessUsage ReadProcessUsage();

// Registers process_resident_memory_bytes, process_virtual_memory_bytes,
// process_cpu_seconds_total and process_start_time_seconds, read at each
// scrape.
void RegisterProcessMetrics(Registry* registry);

// Steady-clock nanoseconds, for latency measurements.
int64_t MonotonicNanos();

}  // namespace pstrain::metrics
