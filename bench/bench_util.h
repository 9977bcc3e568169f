// Small helpers shared by the pstrain_bench subcommands: wall clocks,
// latency samples and their percentiles, medians, and the one-JSON-object-
// per-line output on stdout. Not thread-safe (one recorder per thread).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/json_line.h"

namespace pstrain::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Latency samples in microseconds.
class Latencies {
 public:
  void Add(double us) { samples_.push_back(us); }
  void Append(const Latencies& other) {
    samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  }
  size_t count() const { return samples_.size(); }
  // The q-quantile (0 <= q <= 1), nearest rank; 0 without samples.
  double Quantile(double q) {
    if (samples_.empty()) return 0;
    size_t k = static_cast<size_t>(q * static_cast<double>(samples_.size() - 1) + 0.5);
    std::nth_element(samples_.begin(), samples_.begin() + k, samples_.end());
    return samples_[k];
  }

 private:
  std::vector<double> samples_;
};

// Removes a folder (and everything in it) when it goes out of scope.
struct RemoveDirOnExit {
  std::string path;
  ~RemoveDirOnExit() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Writes one result line to stdout (and flushes, so a pipe sees it at once).
inline void PrintResult(const JsonLine& line) {
  std::string s = line.str();
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace pstrain::bench
