#include "common/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pstrain {

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU list \"", text, "\": ", why, " (expected e.g. 0-3,6)"));
  };
  if (text.empty()) return bad("empty");
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(item, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range.first, &lo) || lo < 0) return bad(absl::StrCat("bad item \"", item, "\""));
    hi = lo;
    if (item.find('-') != absl::string_view::npos &&
        (!absl::SimpleAtoi(range.second, &hi) || hi < lo)) {
      return bad(absl::StrCat("bad range \"", item, "\""));
    }
    if (hi >= CPU_SETSIZE) return bad(absl::StrCat("CPU ", hi, " is beyond ", CPU_SETSIZE - 1));
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> items;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    items.push_back(j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(items, ",");
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

CpuHalves SplitAllowedCpus() {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) return {};
  const auto half = static_cast<std::ptrdiff_t>(cpus.size() / 2);
  return {{cpus.begin(), cpus.begin() + half}, {cpus.begin() + half, cpus.end()}};
}

absl::Status PinCurrentThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPUs to pin to");
  const std::vector<int> allowed = AllowedCpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " is not among this process's CPUs (",
                                                     FormatCpuList(allowed), ")"));
    }
    CPU_SET(c, &set);
  }
  // 0: the calling thread (sched_setaffinity takes a thread id on Linux).
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(absl::StrCat("sched_setaffinity(", FormatCpuList(cpus),
                                            "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PinProcess(absl::string_view list) {
  if (list.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(list);
  absl::Status st = cpus.ok() ? PinCurrentThread(*cpus) : cpus.status();
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("--cpus: ", st.message()));
  // Threads that libraries started while loading (a BLAS pool) as well.
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : *cpus) CPU_SET(c, &set);
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    pid_t tid = 0;
    if (absl::SimpleAtoi(task.path().filename().string(), &tid)) {
      (void)sched_setaffinity(tid, sizeof(set), &set);
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
