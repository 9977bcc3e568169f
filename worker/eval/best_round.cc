#include "worker/eval/best_round.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace pstrain::worker {

absl::StatusOr<EvalMetric> ParseEvalMetric(const std::string& name) {
  if (name == "eval_auc") return EvalMetric::kAuc;
  if (name == "eval_logloss") return EvalMetric::kLogloss;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown metric '", name, "' (eval_auc: higher is better, eval_logloss: lower is better)"));
}

const char* EvalMetricName(EvalMetric metric) {
  return metric == EvalMetric::kAuc ? "eval_auc" : "eval_logloss";
}

bool BestRound::Offer(const EvalRound& r) {
  const double v = Value(r);
  bool better = false;
  if (std::isfinite(v)) {
    if (!best_) {
      better = true;
    } else {
      better = metric_ == EvalMetric::kAuc ? v > Value(*best_) : v < Value(*best_);
    }
  }
  if (better) {
    best_ = r;
    rounds_since_best_ = 0;
  } else if (best_) {
    // A rolled-back attempt evaluates rounds before the best one again.
    rounds_since_best_ = std::max(0, r.round - best_->round);
  } else {
    ++rounds_since_best_;
  }
  return better;
}

std::string BestRound::Encode() const {
  if (!best_) return "";
  return absl::StrFormat("%d %d %.17g %.17g", best_->round, best_->step, best_->auc, best_->logloss);
}

absl::Status BestRound::Restore(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ' ', absl::SkipEmpty());
  EvalRound r;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &r.round) ||
      !absl::SimpleAtoi(parts[1], &r.step) || !absl::SimpleAtod(parts[2], &r.auc) ||
      !absl::SimpleAtod(parts[3], &r.logloss)) {
    return absl::DataLossError(absl::StrCat("a stored best round is malformed: '", text, "'"));
  }
  best_ = r;
  rounds_since_best_ = 0;
  return absl::OkStatus();
}

}  // namespace pstrain::worker
