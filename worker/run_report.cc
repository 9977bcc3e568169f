#include "worker/run_report.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

#include "common/file_util.h"
#include "common/status.h"
#include "worker/progress.h"
#include "worker/trainer.h"

namespace pstrain::worker {

void RecordEval(const BinaryMetrics& m, int64_t step, const std::string& where,
                double elapsed_seconds, MetricsFile* metrics, TrainResult* result,
                const std::vector<HeadEval>& heads) {
  result->eval_auc = m.auc;
  result->eval_logloss = m.logloss;
  result->eval_accuracy = m.accuracy;
  result->eval_ne = m.normalized_entropy;
  result->eval_calibration = m.calibration;
  result->eval_rows = m.count;
  spdlog::info("eval {}: AUC {:.4f}, logloss {:.4f}, NE {:.4f}, calibration {:.3f} over {} rows",
               where, m.auc, m.logloss, m.normalized_entropy, m.calibration, m.count);
  result->eval_heads = heads;
  JsonLine line = EvalEventLine(step, m, elapsed_seconds);
  if (!heads.empty()) {
    for (const HeadEval& h : heads) spdlog::info("  {}", HeadEvalText(h));
    if (heads.size() > 1) {
      spdlog::info("  weighted loss of the {} heads: {:.4f}", heads.size(), WeightedHeadLoss(heads));
    }
    AddHeadFields(heads, &line);
  }
  metrics->Write(line);
}

absl::StatusOr<double> ReadOracleAuc(const std::string& path) {
  if (path.empty()) return NAN;
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const size_t k = text.find("\"oracle_auc\"");
  if (k == std::string::npos) return NAN;
  const size_t colon = text.find(':', k);
  if (colon == std::string::npos) return NAN;
  return std::strtod(text.c_str() + colon + 1, nullptr);
}

void AddSummaryFigures(const TrainResult& result, const JobFigures& job, JsonLine* line) {
  const bool evaluated = job.evaluated;
  line->Add("steps", result.steps)
      .Add("train_samples", static_cast<int64_t>(job.train_samples))
      .Add("eval_auc", evaluated ? result.eval_auc : NAN)
      .Add("oracle_auc", job.oracle_auc)
      .Add("eval_logloss", evaluated ? result.eval_logloss : NAN)
      .Add("eval_ne", evaluated ? result.eval_ne : NAN)
      .Add("eval_calibration", evaluated ? result.eval_calibration : NAN)
      .Add("eval_accuracy", evaluated ? result.eval_accuracy : NAN)
      .Add("samples_per_sec", job.samples_per_sec)
      .Add("wall_seconds", job.wall_seconds)
      .Add("compute_seconds", result.compute_seconds)
      .Add("wait_seconds", result.wait_seconds)
      .Add("data_seconds", result.data_seconds);
  if (evaluated && !result.eval_heads.empty()) AddHeadFields(result.eval_heads, line);
}

}  // namespace pstrain::worker
