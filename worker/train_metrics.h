// TrainMetrics: a worker's live training numbers, for its /metrics
// endpoint and for the heartbeats that feed the coordinator's dashboard.
//
// The trainer reports each step (OnStep: a few atomic adds and one
// uncontended lock) and each evaluation; the heartbeat (on the RPC I/O
// thread) calls FillHeartbeat, which turns the totals since the previous
// heartbeat into rates and a mean loss. Thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "proto_msgs/messages.h"

namespace pstrain::worker {

// Seconds from `since` to now: the clock of a step's data, compute and wait
// timings and of the run's wall time.
inline double SecondsSince(absl::Time since) {
  return absl::ToDoubleSeconds(absl::Now() - since);
}

struct StepReport {
  int64_t step = 0;           // clock after this step
  int64_t samples = 0;        // samples in this step
  double loss_sum = 0;        // summed over the step's samples
  double compute_seconds = 0; // totals so far
  double wait_seconds = 0;
  double data_seconds = 0;
  int64_t reader_rows = 0;    // rows the data reader has parsed so far
  double reader_rows_per_busy_second = 0;
};

class TrainMetrics {
 public:
  // Registers the worker's families (and the process metrics) in
  // `registry`, which must outlive this object.
  explicit TrainMetrics(metrics::Registry* registry);

  void OnStep(const StepReport& r);
  void OnEval(int64_t step, double auc, double logloss);
  // A model of several heads: each head's evaluation (worker 0; a
  // regression head: AUC NaN, its mean squared error as logloss), before
  // the OnEval of that evaluation, so that a heartbeat never pairs a new
  // evaluation's step with the heads of the one before.
  void OnHeadEval(const std::string& head, double auc, double logloss);
  // A stream partition this worker has passed: the progressive AUC and
  // logloss of its share (NaN: none scored) and the rows it trained of it.
  void OnPartition(double auc, double logloss, int64_t rows);
  // The data position whose gradients have all reached the servers (sent
  // in the heartbeats: a dead worker's shard is adopted from there).
  void SetPosition(int32_t epoch, int64_t rows);

  // Fills the worker's heartbeat fields and updates the rate gauges
  // (samples/s, loss, reader rows/s) over the time since the last call.
  void FillHeartbeat(proto::Heartbeat* hb);

 private:
  metrics::Counter* steps_;
  metrics::Counter* samples_;
  metrics::Counter* compute_seconds_;
  metrics::Counter* wait_seconds_;
  metrics::Counter* data_seconds_;
  metrics::Counter* reader_rows_;
  metrics::Gauge* clock_;
  metrics::Gauge* samples_per_sec_;
  metrics::Gauge* loss_;
  metrics::Gauge* reader_rows_per_sec_;
  metrics::Gauge* reader_busy_rows_per_sec_;
  metrics::Gauge* eval_auc_;
  metrics::Gauge* eval_logloss_;
  metrics::Gauge* eval_step_;
  metrics::Family<metrics::Gauge>* head_auc_;      // by head: a model of several heads
  metrics::Family<metrics::Gauge>* head_logloss_;
  metrics::Counter* partitions_;
  metrics::Gauge* partition_auc_;
  metrics::Gauge* partition_logloss_;
  metrics::Gauge* partition_rows_;

  absl::Mutex mu_;
  // Since the last heartbeat.
  double window_loss_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t window_samples_ ABSL_GUARDED_BY(mu_) = 0;
  // Totals.
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t data_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t data_rows_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reader_total_ ABSL_GUARDED_BY(mu_) = 0;
  double reader_busy_rate_ ABSL_GUARDED_BY(mu_) = 0;
  double eval_auc_value_ ABSL_GUARDED_BY(mu_) = NAN;
  int32_t partitions_value_ ABSL_GUARDED_BY(mu_) = 0;
  double partition_auc_value_ ABSL_GUARDED_BY(mu_) = NAN;
  double eval_logloss_value_ ABSL_GUARDED_BY(mu_) = NAN;
  int64_t eval_step_value_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<proto::HeadScore> head_scores_ ABSL_GUARDED_BY(mu_);  // by head, OnHeadEval's
  double last_loss_ ABSL_GUARDED_BY(mu_) = NAN;
  double last_compute_ ABSL_GUARDED_BY(mu_) = 0, last_wait_ ABSL_GUARDED_BY(mu_) = 0,
         last_data_ ABSL_GUARDED_BY(mu_) = 0;
  // At the last heartbeat.
  absl::Time sampled_at_ ABSL_GUARDED_BY(mu_);
  int64_t sampled_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sampled_reader_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain::worker
