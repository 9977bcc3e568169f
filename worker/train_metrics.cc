#include "worker/train_metrics.h"

#include <cmath>

#include "common/metrics/process_metrics.h"

namespace pstrain::worker {

TrainMetrics::TrainMetrics(metrics::Registry* r) : sampled_at_(absl::Now()) {
  metrics::RegisterProcessMetrics(r);
  steps_ = r->GetCounter("pstrain_worker_steps_total", "Training steps (pushes) made.");
  samples_ = r->GetCounter("pstrain_worker_samples_total", "Training samples processed.");
  compute_seconds_ = r->GetCounter("pstrain_worker_compute_seconds_total",
                                   "Time in forward/backward.");
  wait_seconds_ = r->GetCounter("pstrain_worker_wait_seconds_total",
                                "Time waiting for pulls, pushes and collectives.");
  data_seconds_ = r->GetCounter("pstrain_worker_data_seconds_total",
                                "Time waiting for the data reader.");
  reader_rows_ = r->GetCounter("pstrain_worker_reader_rows_total", "Rows parsed by the data reader.");
  clock_ = r->GetGauge("pstrain_worker_clock", "This worker's clock (steps pushed).");
  samples_per_sec_ = r->GetGauge("pstrain_worker_samples_per_second",
                                 "Training throughput over the last heartbeat interval.");
  loss_ = r->GetGauge("pstrain_worker_train_loss",
                      "Mean training loss over the last heartbeat interval.");
  reader_rows_per_sec_ = r->GetGauge("pstrain_worker_reader_rows_per_second",
                                     "Rows parsed by the data reader over the last interval.");
  reader_busy_rows_per_sec_ = r->GetGauge(
      "pstrain_worker_reader_busy_rows_per_second",
      "Data reader speed while busy (rows per second of reader-thread time).");
  eval_auc_ = r->GetGauge("pstrain_worker_eval_auc", "AUC of the latest evaluation (worker 0).");
  eval_logloss_ = r->GetGauge("pstrain_worker_eval_logloss",
                              "Logloss of the latest evaluation (worker 0).");
  head_auc_ = r->AddGauge("pstrain_worker_eval_head_auc",
                          "AUC of each head of a multi-task model at the latest evaluation "
                          "(worker 0; NaN for a regression head).",
                          {"head"});
  head_logloss_ = r->AddGauge("pstrain_worker_eval_head_logloss",
                              "Log loss (a regression head: mean squared error) of each head at "
                              "the latest evaluation (worker 0).",
                              {"head"});
  eval_step_ = r->GetGauge("pstrain_worker_eval_step", "Step of the latest evaluation (worker 0).");
  partitions_ = r->GetCounter("pstrain_worker_partitions_total",
                              "Stream partitions this worker has passed (--train_stream).");
  partition_auc_ = r->GetGauge("pstrain_worker_partition_auc",
                               "Progressive (test-then-train) AUC of this worker's share of the "
                               "latest stream partition.");
  partition_logloss_ = r->GetGauge("pstrain_worker_partition_logloss",
                                   "Progressive logloss of this worker's share of the latest "
                                   "stream partition.");
  partition_rows_ = r->GetGauge("pstrain_worker_partition_rows",
                                "Rows this worker trained of the latest stream partition.");
  partition_auc_->Set(NAN);
  partition_logloss_->Set(NAN);
  eval_auc_->Set(NAN);
  eval_logloss_->Set(NAN);
  eval_step_->Set(-1);
  loss_->Set(NAN);
}

void TrainMetrics::OnStep(const StepReport& r) {
  steps_->Inc();
  samples_->Inc(static_cast<double>(r.samples));
  clock_->Set(static_cast<double>(r.step));
  absl::MutexLock lock(&mu_);
  compute_seconds_->Inc(r.compute_seconds - last_compute_);
  wait_seconds_->Inc(r.wait_seconds - last_wait_);
  data_seconds_->Inc(r.data_seconds - last_data_);
  last_compute_ = r.compute_seconds;
  last_wait_ = r.wait_seconds;
  last_data_ = r.data_seconds;
  if (r.reader_rows > reader_total_) {
    reader_rows_->Inc(static_cast<double>(r.reader_rows - reader_total_));
    reader_total_ = r.reader_rows;
  }
  reader_busy_rate_ = r.reader_rows_per_busy_second;
  step_ = r.step;
  total_samples_ += r.samples;
  window_samples_ += r.samples;
  window_loss_ += r.loss_sum;
}

void TrainMetrics::OnEval(int64_t step, double auc, double logloss) {
  eval_auc_->Set(auc);
  eval_logloss_->Set(logloss);
  eval_step_->Set(static_cast<double>(step));
  absl::MutexLock lock(&mu_);
  eval_auc_value_ = auc;
  eval_logloss_value_ = logloss;
  eval_step_value_ = step;
}

void TrainMetrics::OnHeadEval(const std::string& head, double auc, double logloss) {
  head_auc_->Get({head})->Set(auc);
  head_logloss_->Get({head})->Set(logloss);
  absl::MutexLock lock(&mu_);
  for (proto::HeadScore& h : head_scores_) {
    if (h.head == head) {
      h.auc = auc;
      h.logloss = logloss;
      return;
    }
  }
  head_scores_.push_back(proto::HeadScore{head, auc, logloss});
}

void TrainMetrics::OnPartition(double auc, double logloss, int64_t rows) {
  partitions_->Inc();
  partition_auc_->Set(auc);
  partition_logloss_->Set(logloss);
  partition_rows_->Set(static_cast<double>(rows));
  absl::MutexLock lock(&mu_);
  ++partitions_value_;
  partition_auc_value_ = auc;
}

void TrainMetrics::SetPosition(int32_t epoch, int64_t rows) {
  absl::MutexLock lock(&mu_);
  data_epoch_ = epoch;
  data_rows_ = rows;
}

void TrainMetrics::FillHeartbeat(proto::Heartbeat* hb) {
  metrics::ProcessUsage usage = metrics::ReadProcessUsage();
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  double dt = std::max(1e-3, absl::ToDoubleSeconds(now - sampled_at_));
  double rate = static_cast<double>(total_samples_ - sampled_samples_) / dt;
  double reader_rate = static_cast<double>(reader_total_ - sampled_reader_) / dt;
  // The loss over the window; an idle window (evaluation, waiting) keeps
  // the last value.
  if (window_samples_ > 0) last_loss_ = window_loss_ / static_cast<double>(window_samples_);
  window_loss_ = 0;
  window_samples_ = 0;
  sampled_at_ = now;
  sampled_samples_ = total_samples_;
  sampled_reader_ = reader_total_;
  samples_per_sec_->Set(rate);
  loss_->Set(last_loss_);
  reader_rows_per_sec_->Set(reader_rate);
  reader_busy_rows_per_sec_->Set(reader_busy_rate_);

  hb->step = step_;
  hb->data_epoch = data_epoch_;
  hb->data_rows = data_rows_;
  hb->samples = static_cast<uint64_t>(total_samples_);
  hb->samples_per_sec = rate;
  hb->loss = last_loss_;
  hb->reader_rows_per_sec = reader_busy_rate_;
  hb->eval_auc = eval_auc_value_;
  hb->eval_logloss = eval_logloss_value_;
  hb->eval_step = eval_step_value_;
  hb->eval_heads = head_scores_;
  hb->partitions = partitions_value_;
  hb->partition_auc = partition_auc_value_;
  hb->rss_bytes = usage.resident_bytes;
  hb->cpu_seconds = usage.cpu_seconds;
}

}  // namespace pstrain::worker
