// Binary-classification metrics over a whole evaluation set: exact ROC AUC
// (ties get the average rank), mean log loss and accuracy.
//
// All functions are pure and thread-safe; MetricsAccumulator is owned and
// used by one thread. Scores are probabilities in [0, 1] for the log loss
// and accuracy; the AUC only needs their order. Labels are 0/1 (a label >
// 0.5 counts as positive).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/json_line.h"

namespace pstrain::worker {

// Exact ROC AUC in O(n log n): the probability that a random positive row
// scores above a random negative one, ties counting one half (the
// Mann-Whitney U statistic with average ranks). Returns NaN when the labels
// are all equal (or there are no rows): the AUC is undefined there. Returns
// NaN when a score is NaN. REQUIRES: scores.size() == labels.size().
double RocAuc(std::span<const float> scores, std::span<const float> labels);
double RocAuc(std::span<const double> scores, std::span<const float> labels);

// Mean binary cross-entropy with probabilities clamped to [eps, 1 - eps].
// 0 for no rows. REQUIRES: equal sizes.
double LogLoss(std::span<const float> probs, std::span<const float> labels, double eps = 1e-7);
double LogLoss(std::span<const double> probs, std::span<const float> labels, double eps = 1e-7);

// Fraction of rows where (prob >= 0.5) equals the label. 0 for no rows.
double Accuracy(std::span<const float> probs, std::span<const float> labels);

struct BinaryMetrics {
  int64_t count = 0;
  double positive_rate = 0;    // mean label
  double mean_prediction = 0;  // mean probability
  double auc = 0;              // see RocAuc (NaN if undefined)
  double logloss = 0;
  // Normalized entropy (He et al., "Practical lessons from predicting clicks
  // on ads at Facebook"; TorchRec's NE): the log loss over the entropy of
  // the positive rate, i.e. against always predicting the base rate. Below
  // 1 the model beats the base rate. NaN when all labels are equal.
  double normalized_entropy = 0;
  // Mean prediction over the positive rate: 1 is calibrated, above 1 the
  // model over-predicts. NaN without positives.
  double calibration = 0;
  double accuracy = 0;  // at a threshold of 0.5: says little at low click rates
};

// The entropy (nats) of a Bernoulli(p) label: the log loss of predicting p
// for every row; 0 at p = 0 or 1.
double BaseRateEntropy(double p);

BinaryMetrics ComputeBinaryMetrics(std::span<const float> probs, std::span<const float> labels);

// The metrics file's line for an evaluation at training step `step`:
// {"event":"eval","step",...,"eval_auc","eval_logloss","eval_ne","eval_calibration",
//  "eval_positive_rate","eval_accuracy","eval_rows","elapsed_seconds"}.
JsonLine EvalEventLine(int64_t step, const BinaryMetrics& m, double elapsed_seconds);

// Collects (probability, label) pairs batch by batch, then computes the
// exact metrics over everything added.
class MetricsAccumulator {
 public:
  // REQUIRES: probs.size() == labels.size().
  void Add(std::span<const float> probs, std::span<const float> labels);
  void Reset();
  int64_t count() const { return static_cast<int64_t>(probs_.size()); }
  BinaryMetrics Compute() const;

 private:
  std::vector<float> probs_;
  std::vector<float> labels_;
};

}  // namespace pstrain::worker
