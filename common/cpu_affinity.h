// CPU affinity: which CPUs a process or thread may run on.
//
// A parameter server and a worker on one host fight over caches when the
// scheduler moves their threads around: the server reads each gradient right
// after its I/O thread received it and writes the weights its I/O thread then
// sends, so a server whose threads share a core reads those bytes from that
// core's cache rather than from memory. Pinning each process (or, in one
// process, each node's threads) to its own CPUs keeps them there.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Parses a CPU list as taskset and cpusets write it: "0-3,6,8-9".
// InvalidArgument for anything else (empty items, reversed or huge ranges).
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);
// The inverse, compressed into ranges: {0,1,2,5} -> "0-2,5".
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs this process may run on, in increasing order.
std::vector<int> AllowedCpus();

// AllowedCpus() cut in two: servers on the first half, workers on the
// second, as if on two hosts (--pin_cpus, the bench's --pin_nodes). Both
// empty when the process has fewer than 2 CPUs.
struct CpuHalves {
  std::vector<int> first, second;
};
CpuHalves SplitAllowedCpus();

// Restricts the calling thread (threads it creates later inherit it) to
// `cpus`. InvalidArgument when one is not allowed for this process;
// the error of sched_setaffinity otherwise.
absl::Status PinCurrentThread(const std::vector<int>& cpus);

// The --cpus flag of a process (pstrain_server, pstrain_worker, pstrain
// train): pins every thread of the process (and so those it starts
// afterwards) to the CPUs `list` names ("": leaves the process alone).
// Call it first thing in main. InvalidArgument names the flag.
absl::Status PinProcess(absl::string_view list);

// Help text of the --cpus flags.
inline constexpr char kCpusFlagHelp[] =
    "CPUs this process runs on, as taskset writes them (0-3,6; empty: any). Give a server and "
    "a worker on one host CPUs of their own: each then reads the bytes its I/O thread just "
    "received from its own cache.";

}  // namespace pstrain
