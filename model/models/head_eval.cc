#include "model/models/head_eval.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain::worker {

std::vector<HeadEval> EvaluateHeads(const std::vector<ModelHead>& heads,
                                    std::span<const float> preds, std::span<const float> labels) {
  const size_t n = heads.size();
  const size_t rows = n == 0 ? 0 : preds.size() / n;
  std::vector<HeadEval> out;
  std::vector<float> p, y;
  for (size_t h = 0; h < n; ++h) {
    p.clear();
    y.clear();
    for (size_t r = 0; r < rows; ++r) {
      const float label = labels[r * n + h];
      if (std::isnan(label)) continue;
      p.push_back(preds[r * n + h]);
      y.push_back(label);
    }
    HeadEval e;
    e.name = heads[h].name;
    e.regression = heads[h].regression;
    e.weight = heads[h].weight;
    e.rows = static_cast<int64_t>(p.size());
    if (e.regression) {
      double sum = 0;
      for (size_t i = 0; i < p.size(); ++i) sum += (static_cast<double>(p[i]) - y[i]) * (p[i] - y[i]);
      e.mse = p.empty() ? NAN : sum / static_cast<double>(p.size());
      e.rmse = std::sqrt(e.mse);
    } else {
      e.binary = ComputeBinaryMetrics(p, y);
    }
    out.push_back(std::move(e));
  }
  return out;
}

double WeightedHeadLoss(const std::vector<HeadEval>& heads) {
  double total = 0;
  for (const HeadEval& h : heads) total += h.weight * (h.regression ? h.mse : h.binary.logloss);
  return total;
}

void AppendHeadLabels(const Batch& b, const std::vector<ModelHead>& heads, std::vector<float>* labels) {
  for (int r = 0; r < b.size; ++r) {
    for (size_t h = 0; h < heads.size(); ++h) labels->push_back(HeadLabelOf(b, heads, h, r));
  }
}

void AddHeadFields(const std::vector<HeadEval>& heads, JsonLine* line) {
  for (const HeadEval& h : heads) {
    if (h.regression) {
      line->Add(absl::StrCat(h.name, ".eval_rmse"), h.rmse);
    } else {
      line->Add(absl::StrCat(h.name, ".eval_auc"), h.binary.auc)
          .Add(absl::StrCat(h.name, ".eval_logloss"), h.binary.logloss);
    }
    line->Add(absl::StrCat(h.name, ".eval_rows"), h.rows);
  }
  line->Add("eval_weighted_loss", WeightedHeadLoss(heads));
}

std::string HeadEvalText(const HeadEval& h) {
  if (h.regression) return absl::StrFormat("head %s: RMSE %.4f over %d rows", h.name, h.rmse, h.rows);
  return absl::StrFormat("head %s: AUC %.4f, logloss %.4f, calibration %.3f over %d rows", h.name,
                         h.binary.auc, h.binary.logloss, h.binary.calibration, h.rows);
}

}  // namespace pstrain::worker
