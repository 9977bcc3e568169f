// BestRound: which evaluation round of a run scored best so far, by the
// metric --keep_best names, and whether --early_stop_rounds says to stop
// (that many evaluations in a row without an improvement). The lead worker
// owns one and feeds it every evaluation it gathers; the best round travels
// through the coordinator's store (Encode/Decode) so that a new lead or a
// rolled-back attempt goes on from it. Pure logic, not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::worker {

// What --keep_best compares.
enum class EvalMetric { kAuc, kLogloss };

// "eval_auc" (higher is better) or "eval_logloss" (lower is better);
// InvalidArgument naming both otherwise.
absl::StatusOr<EvalMetric> ParseEvalMetric(const std::string& name);
const char* EvalMetricName(EvalMetric metric);

// One evaluation of the run. Rounds count evaluations from 1: the periodic
// one at step k * --eval_every_steps is round k, the final one comes after.
struct EvalRound {
  int round = 0;
  int64_t step = 0;
  double auc = 0;
  double logloss = 0;
};

class BestRound {
 public:
  // `patience` 0: never stop early.
  BestRound(EvalMetric metric, int patience) : metric_(metric), patience_(patience) {}

  // Records `r`; true when it is strictly better than every round before
  // (a NaN metric never is). Non-improving rounds count against patience
  // by round number (a round skipped, say in a lead's take-over, counts too).
  bool Offer(const EvalRound& r);
  // Patience ran out: the last offered round is `patience` rounds past the
  // best one.
  bool ShouldStop() const { return patience_ > 0 && rounds_since_best_ >= patience_; }

  EvalMetric metric() const { return metric_; }
  double Value(const EvalRound& r) const { return metric_ == EvalMetric::kAuc ? r.auc : r.logloss; }
  const std::optional<EvalRound>& best() const { return best_; }
  int rounds_since_best() const { return rounds_since_best_; }

  // The best round as text for the store, and back. Restore() takes a round
  // stored by an earlier lead or attempt; DataLoss when `text` is malformed.
  std::string Encode() const;
  absl::Status Restore(const std::string& text);

 private:
  EvalMetric metric_;
  int patience_;
  std::optional<EvalRound> best_;
  int rounds_since_best_ = 0;
};

}  // namespace pstrain::worker
