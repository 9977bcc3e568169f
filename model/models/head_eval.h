// The evaluation of a model of several heads (a model file's multi-task
// heads): its predictions and labels come [rows x heads] row-major, a NaN
// label where a row has none for that head (masked, as in training). Each
// head gets its own metrics over the rows that have its label: AUC, log
// loss and the rest for a probability head, root mean squared error for a
// regression head. Pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/json_line.h"
#include "data/batch.h"
#include "data/eval/metrics.h"
#include "model/models/model.h"

namespace pstrain::worker {

struct HeadEval {
  std::string name;
  bool regression = false;
  float weight = 1.0f;
  int64_t rows = 0;       // rows with the head's label
  BinaryMetrics binary;   // a probability head's
  double rmse = 0;        // a regression head's (NaN without rows)
  double mse = 0;
};

// True for the built-in networks' one output: one probability head on the
// first label (then predictions and labels are the plain [rows]).
inline bool OneLabelHead(const std::vector<ModelHead>& heads) {
  return heads.size() == 1 && !heads[0].regression && heads[0].label == 0;
}

// Each head's metrics. REQUIRES: preds.size() == labels.size() ==
// rows * heads.size().
std::vector<HeadEval> EvaluateHeads(const std::vector<ModelHead>& heads,
                                    std::span<const float> preds, std::span<const float> labels);

// The heads' weighted loss: sum of weight x (log loss, or mean squared
// error) over the heads, the figure their training minimises.
double WeightedHeadLoss(const std::vector<HeadEval>& heads);

// Appends batch b's labels of every head to `labels`, [b.size x heads]
// (each head's label, LabelOf).
void AppendHeadLabels(const Batch& b, const std::vector<ModelHead>& heads, std::vector<float>* labels);

// Adds each head's figures to an "eval" line, "<head>.eval_auc",
// "<head>.eval_logloss", "<head>.eval_rows" (a regression head's
// "<head>.eval_rmse"), and "eval_weighted_loss".
void AddHeadFields(const std::vector<HeadEval>& heads, JsonLine* line);

// One line per head for the log: "head ctr: AUC 0.7312, logloss 0.4521 over
// 9000 rows".
std::string HeadEvalText(const HeadEval& head);

}  // namespace pstrain::worker
