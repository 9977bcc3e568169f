// WaitLog: when a long wait says so in the log: 5 s after it began, then at
// doubling intervals at most a minute apart (10 s, 20 s, 40 s, 80 s, 140 s,
// ...), so that a stuck wait names what it waits for without flooding the
// log. Used by the trainers' waits on other workers and the coordinator's
// store. Not thread-safe: one per wait.
#pragma once

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain::worker {

class WaitLog {
 public:
  // The wait begins now.
  WaitLog() = default;

  // Whether a log line is due now (then the next one is due later).
  bool Due() {
    const absl::Duration waited = absl::Now() - start_;
    if (waited < next_) return false;
    next_ = std::min(next_ * 2, next_ + absl::Minutes(1));
    return true;
  }
  // Seconds since the wait began.
  double seconds() const { return absl::ToDoubleSeconds(absl::Now() - start_); }

 private:
  absl::Time start_ = absl::Now();
  absl::Duration next_ = absl::Seconds(5);
};

}  // namespace pstrain::worker
