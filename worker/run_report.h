// What a training run reports the same way in every mode (ps, allreduce,
// pipeline): an evaluation's figures (the result's, the log line, the
// metrics file's "eval" event) and the figures of the summary line, which
// the lead worker (pipeline: worker 0) writes once at the end. What differs
// by mode stays with the trainers: how an evaluation's scores are gathered,
// the summary's fields of the mode (workers, replicas, best round) and the
// RESULT line. Stateless functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/json_line.h"
#include "data/eval/metrics.h"
#include "model/models/head_eval.h"

namespace pstrain::worker {

class MetricsFile;   // worker/progress.h
struct TrainResult;  // worker/trainer.h

// An evaluation of the model at training step `step`: its metrics into
// `result`'s eval fields, a log line "eval <where>: AUC ..." (`where`: "at
// step 40", "after epoch 2 (step 40)") and the "eval" event in `metrics`.
// `elapsed_seconds`: since the process started.
// With several heads (`heads`, whose first is `m`), each head's figures too.
void RecordEval(const BinaryMetrics& m, int64_t step, const std::string& where,
                double elapsed_seconds, MetricsFile* metrics, TrainResult* result,
                const std::vector<HeadEval>& heads = {});

// The "oracle_auc" number of a data generator's meta file (--eval_meta):
// NaN when `path` is empty or the file has no such number; an error when
// the file cannot be read.
absl::StatusOr<double> ReadOracleAuc(const std::string& path);

// What the summary says of the whole job, beside one worker's result.
struct JobFigures {
  double train_samples = 0;    // trained in all
  double samples_per_sec = 0;  // the job's rate
  double oracle_auc = NAN;
  double wall_seconds = 0;     // since the process started
  bool evaluated = true;       // false: the eval figures are null
};

// Adds the figures every summary line has, in this order: steps,
// train_samples, eval_auc, oracle_auc, eval_logloss, eval_ne,
// eval_calibration, eval_accuracy, samples_per_sec, wall_seconds,
// compute_seconds, wait_seconds, data_seconds (`result`: the lead's).
void AddSummaryFigures(const TrainResult& result, const JobFigures& job, JsonLine* line);

}  // namespace pstrain::worker
