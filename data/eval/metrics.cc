#include "data/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace pstrain::worker {
namespace {

template <typename T>
double RocAucImpl(std::span<const T> scores, std::span<const float> labels) {
  const size_t n = scores.size();
  std::vector<std::pair<T, bool>> rows(n);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(scores[i])) return std::numeric_limits<double>::quiet_NaN();
    rows[i] = {scores[i], labels[i] > 0.5f};
  }
  std::sort(rows.begin(), rows.end(),
            [](const std::pair<T, bool>& a, const std::pair<T, bool>& b) {
              return a.first < b.first;
            });
  // Twice the Mann-Whitney U: for every group of equal scores, each positive
  // beats every negative below the group and ties with those inside it.
  unsigned __int128 twice_u = 0;
  uint64_t negatives_below = 0;
  uint64_t positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uint64_t pos = 0;
    while (j < n && rows[j].first == rows[i].first) pos += rows[j++].second;
    const uint64_t neg = (j - i) - pos;
    twice_u += static_cast<unsigned __int128>(2 * negatives_below + neg) * pos;
    negatives_below += neg;
    positives += pos;
    i = j;
  }
  const uint64_t negatives = negatives_below;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  const long double pairs = static_cast<long double>(positives) * negatives;
  return static_cast<double>(static_cast<long double>(twice_u) / (2.0L * pairs));
}

template <typename T>
double LogLossImpl(std::span<const T> probs, std::span<const float> labels, double eps) {
  if (probs.empty()) return 0.0;
  double sum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    double p = std::clamp(static_cast<double>(probs[i]), eps, 1.0 - eps);
    sum -= labels[i] > 0.5f ? std::log(p) : std::log1p(-p);
  }
  return sum / static_cast<double>(probs.size());
}

}  // namespace

double RocAuc(std::span<const float> scores, std::span<const float> labels) {
  return RocAucImpl(scores, labels);
}
double RocAuc(std::span<const double> scores, std::span<const float> labels) {
  return RocAucImpl(scores, labels);
}
double LogLoss(std::span<const float> probs, std::span<const float> labels, double eps) {
  return LogLossImpl(probs, labels, eps);
}
double LogLoss(std::span<const double> probs, std::span<const float> labels, double eps) {
  return LogLossImpl(probs, labels, eps);
}

double Accuracy(std::span<const float> probs, std::span<const float> labels) {
  if (probs.empty()) return 0.0;
  size_t right = 0;
  for (size_t i = 0; i < probs.size(); ++i) right += (probs[i] >= 0.5f) == (labels[i] > 0.5f);
  return static_cast<double>(right) / static_cast<double>(probs.size());
}

BinaryMetrics ComputeBinaryMetrics(std::span<const float> probs, std::span<const float> labels) {
  BinaryMetrics m;
  m.count = static_cast<int64_t>(probs.size());
  if (m.count > 0) {
    double pos = 0, pred = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
      pos += labels[i] > 0.5f;
      pred += probs[i];
    }
    m.positive_rate = pos / m.count;
    m.mean_prediction = pred / m.count;
  }
  m.auc = RocAuc(probs, labels);
  m.logloss = LogLoss(probs, labels);
  m.accuracy = Accuracy(probs, labels);
  const double h = BaseRateEntropy(m.positive_rate);
  m.normalized_entropy = m.count > 0 && h > 0 ? m.logloss / h : NAN;
  m.calibration = m.positive_rate > 0 ? m.mean_prediction / m.positive_rate : NAN;
  return m;
}

double BaseRateEntropy(double p) {
  if (!(p > 0 && p < 1)) return 0;
  return -(p * std::log(p) + (1 - p) * std::log1p(-p));
}

void MetricsAccumulator::Add(std::span<const float> probs, std::span<const float> labels) {
  probs_.insert(probs_.end(), probs.begin(), probs.end());
  labels_.insert(labels_.end(), labels.begin(), labels.end());
}

void MetricsAccumulator::Reset() {
  probs_.clear();
  labels_.clear();
}

BinaryMetrics MetricsAccumulator::Compute() const { return ComputeBinaryMetrics(probs_, labels_); }

JsonLine EvalEventLine(int64_t step, const BinaryMetrics& m, double elapsed_seconds) {
  JsonLine line;
  line.Add("event", "eval")
      .Add("step", step)
      .Add("eval_auc", m.auc)
      .Add("eval_logloss", m.logloss)
      .Add("eval_ne", m.normalized_entropy)
      .Add("eval_calibration", m.calibration)
      .Add("eval_positive_rate", m.positive_rate)
      .Add("eval_accuracy", m.accuracy)
      .Add("eval_rows", m.count)
      .Add("elapsed_seconds", elapsed_seconds);
  return line;
}

}  // namespace pstrain::worker
