// Trainer: a stream's partitions (--train_stream): progressive validation
// of each partition and the rows trained of it.
//
// Each worker scores the rows of its share of a partition as it trains them
// (StepOutput::probs: the forward pass before the step's update) and, once
// it has passed the partition, stores its part under
// "pv/<partition index>/<rank>" (a model of several heads: each other
// classifying head's under "pvh/<partition index>/<head>/<rank>", stored
// first). The lead merges the parts of a partition
// when every worker's is in (looking at most once a second, without
// waiting) and writes one "partition" line to --metrics_out; at the end of
// training it gathers what is left, waiting: every worker stores its parts
// before it says it has trained. The partitions the lead has passed and
// not written yet outlive a rollback's attempt (TrainOptions::
// pending_partitions). A worker that trains a partition again after a
// rollback stores its part again (the newer part replaces the older); a
// partition the rollback reaches into is written again, and its last line
// counts (its rows are the same; its scores may mix the two attempts').
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_line.h"
#include "common/status.h"
#include "data/eval/progressive.h"
#include "data/reader.h"
#include "worker/kv_client.h"
#include "worker/progress.h"
#include "worker/train_metrics.h"
#include "worker/trainer.h"
#include "worker/trainer_store.h"

namespace pstrain::worker {

std::string Trainer::PartitionKey(int epoch) const { return absl::StrCat("pv/", epoch, "/"); }

namespace {

// A model of several heads: where head h's part of a partition's scores is
// stored ("pvh/<partition index>/<head>/<rank>").
std::string HeadPartitionKey(int epoch, size_t head) {
  return absl::StrCat("pvh/", epoch, "/", head, "/");
}

}  // namespace

void Trainer::ScoreRows(const Batch& batch, const StepOutput& out) {
  if (!streaming() || out.probs.empty()) return;
  // A model of several heads: each other classifying head on the rows that
  // have its label.
  const std::vector<ModelHead>& heads = model_->heads();
  if (heads.size() > 1 && out.head_probs.size() == heads.size() * out.probs.size()) {
    head_score_.resize(heads.size());
    std::vector<float> probs, labels;
    for (size_t h = 1; h < heads.size(); ++h) {
      if (heads[h].regression) continue;
      probs.clear();
      labels.clear();
      for (size_t r = 0; r < out.probs.size() && static_cast<int>(r) < batch.size; ++r) {
        const float y = HeadLabelOf(batch, heads, h, static_cast<int>(r));
        if (std::isnan(y)) continue;
        probs.push_back(out.head_probs[r * heads.size() + h]);
        labels.push_back(y);
      }
      head_score_[h].Add(probs, labels);
    }
  }
  const int label = model_->heads()[0].label;
  if (label == 0) {
    score_.Add(out.probs, std::span<const float>(batch.labels.data(), out.probs.size()));
    return;
  }
  // A model file whose first head learns another label: the rows that have it.
  std::vector<float> probs, labels;
  for (int r = 0; r < batch.size && static_cast<size_t>(r) < out.probs.size(); ++r) {
    const float y = LabelOf(batch, label, r);
    if (std::isnan(y)) continue;
    probs.push_back(out.probs[r]);
    labels.push_back(y);
  }
  score_.Add(probs, labels);
}

void Trainer::AddPending(int epoch, std::string name) {
  auto& pending = *pending_partitions_;
  const auto at = std::lower_bound(
      pending.begin(), pending.end(), epoch,
      [](const PendingPartition& p, int e) { return p.epoch < e; });
  if (at != pending.end() && at->epoch == epoch) return;  // pending already
  pending.insert(at, PendingPartition{epoch, std::move(name)});
}

absl::Status Trainer::ClosePartitions(int end_epoch) {
  for (int e = loop_.position().epoch; e < end_epoch; ++e) {
    const std::string name = reader_->EpochName(e);
    PartitionScore part;
    if (e == loop_.position().epoch) {
      part = std::move(score_);
      part.set_trained_rows(loop_.position().rows);
    }
    score_.Reset();
    // Each other head's part first: a lead that finds this worker's part
    // finds its heads' too.
    for (size_t h = 1; h < head_score_.size(); ++h) {
      if (model_->heads()[h].regression) continue;
      PartitionScore head_part;
      if (e == loop_.position().epoch) head_part = std::move(head_score_[h]);
      head_score_[h].Reset();
      PS_RETURN_IF_ERROR(coordinator_->StoreSet(HeadPartitionKey(e, h) + std::to_string(rank_),
                                                head_part.Encode()));
    }
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(PartitionKey(e) + std::to_string(rank_), part.Encode()));
    spdlog::info("partition {} done here: {} rows trained, {} scored, progressive AUC {:.5f}",
                 name, part.trained_rows(), part.rows(), part.Auc());
    if (options_.train_metrics != nullptr) {
      options_.train_metrics->OnPartition(part.rows() > 0 ? part.Auc() : NAN, part.LogLoss(),
                                          part.trained_rows());
    }
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(absl::StrCat("pv_name/", e), Buffer::FromString(std::string(name))));
    AddPending(e, name);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Trainer::HeadPartition>> Trainer::MergeHeadParts(
    int epoch, const std::vector<int>& workers) {
  // Each worker stored its heads' parts before its own part, which the
  // caller found: they are in the store (a part missing is left out).
  std::vector<HeadPartition> out;
  const std::vector<ModelHead>& heads = model_->heads();
  for (size_t h = 1; h < heads.size(); ++h) {
    if (heads[h].regression) continue;
    HeadPartition part{heads[h].name, PartitionScore()};
    for (int w : workers) {
      auto blob = coordinator_->StoreGet(HeadPartitionKey(epoch, h) + std::to_string(w),
                                         absl::ZeroDuration());
      if (!blob.ok()) {
        if (blob.status().code() == absl::StatusCode::kNotFound ||
            blob.status().code() == absl::StatusCode::kDeadlineExceeded) {
          continue;
        }
        return blob.status();
      }
      PS_ASSIGN_OR_RETURN(PartitionScore s,
                          PartitionScore::Decode(*blob, absl::StrCat("worker ", w, ", head ", heads[h].name)));
      part.score.Merge(s);
    }
    out.push_back(std::move(part));
  }
  return out;
}

absl::Status Trainer::CollectPartitions(bool final) {
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/final));
  if (!lead) {
    pending_partitions_->clear();
    return absl::OkStatus();
  }
  while (!pending_partitions_->empty()) {
    const int e = pending_partitions_->front().epoch;
    const std::string name = pending_partitions_->front().name;
    const std::string key = PartitionKey(e);
    PartitionScore merged;
    int parts = 0;
    std::vector<int> scored_by;  // the workers whose parts are in
    for (int w = 0; w < num_workers_; ++w) {
      std::optional<Buffer> blob;
      if (final) {
        // Not as a final round: a dead worker's parts have no adopter to
        // come from (an adopter scores what it trains as its own).
        PS_ASSIGN_OR_RETURN(blob, FromWorker(key, w, /*final_round=*/false, options_.stats_timeout,
                                             /*clock=*/-1));
      } else {
        auto b = coordinator_->StoreGet(key + std::to_string(w), absl::ZeroDuration());
        if (!b.ok() && b.status().code() != absl::StatusCode::kNotFound &&
            b.status().code() != absl::StatusCode::kDeadlineExceeded) {
          return b.status();
        }
        if (!b.ok()) return absl::OkStatus();  // not every part yet: later
        blob = *std::move(b);
      }
      if (!blob.has_value()) continue;  // a dead worker's
      PS_ASSIGN_OR_RETURN(PartitionScore s,
                          PartitionScore::Decode(*blob, absl::StrCat("worker ", w)));
      merged.Merge(s);
      ++parts;
      scored_by.push_back(w);
    }
    PS_ASSIGN_OR_RETURN(std::vector<HeadPartition> heads, MergeHeadParts(e, scored_by));
    JsonLine line;
    line.Add("event", "partition")
        .Add("partition", name)
        .Add("index", e)
        .Add("step", clock_)
        .Add("rows", merged.trained_rows())
        .Add("rows_scored", merged.rows())
        .Add("progressive_auc", merged.Auc())
        .Add("progressive_logloss", merged.LogLoss())
        .Add("workers", parts)
        .Add("elapsed_seconds", absl::ToDoubleSeconds(absl::Now() - train_start_));
    for (const HeadPartition& h : heads) {
      line.Add(h.name + ".progressive_auc", h.score.Auc())
          .Add(h.name + ".progressive_logloss", h.score.LogLoss())
          .Add(h.name + ".rows_scored", h.score.rows());
    }
    metrics_->Write(line);
    spdlog::info("partition {}: {} rows trained, progressive AUC {:.5f}, logloss {:.5f} ({} of {} "
                 "rows scored)",
                 name, merged.trained_rows(), merged.Auc(), merged.LogLoss(), merged.rows(),
                 merged.trained_rows());
    for (const HeadPartition& h : heads) {
      spdlog::info("partition {}: head {}: progressive AUC {:.5f}, logloss {:.5f} over {} rows",
                   name, h.name, h.score.Auc(), h.score.LogLoss(), h.score.rows());
    }
    PS_RETURN_IF_ERROR(coordinator_->StoreSet("pv_written", Buffer::FromString(std::to_string(e))));
    pending_partitions_->erase(pending_partitions_->begin());
  }
  return absl::OkStatus();
}

absl::Status Trainer::PickUpUnwrittenPartitions() {
  if (!streaming() || kv_->layout().restored_step < 0) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
  if (!lead) return absl::OkStatus();
  // A lead that is a new process (the old one died, --recover_workers)
  // knows nothing of the partitions before its position: the store says
  // which lines were written.
  int written = -1;
  auto w = coordinator_->StoreGet("pv_written", absl::ZeroDuration());
  if (w.ok()) {
    const std::string text(reinterpret_cast<const char*>(w->data()), w->size());
    if (!absl::SimpleAtoi(text, &written)) return absl::DataLossError("pv_written: not a number");
  } else if (!trainer_store::Missing(w.status())) {
    return w.status();
  }
  for (int e = written + 1; e < loop_.position().epoch; ++e) {
    auto name = coordinator_->StoreGet(absl::StrCat("pv_name/", e), absl::ZeroDuration());
    if (!name.ok()) continue;  // no worker passed it
    AddPending(e, std::string(reinterpret_cast<const char*>(name->data()), name->size()));
  }
  return absl::OkStatus();
}

absl::Status Trainer::FinishPartitions() {
  if (!streaming() || loop_.position().finished) return absl::OkStatus();
  // Every partition the reader took, the ones without rows here included.
  int end = loop_.position().epoch;
  while (!reader_->EpochName(end).empty()) ++end;
  return ClosePartitions(end);
}

}  // namespace pstrain::worker

namespace pstrain::worker {

absl::StatusOr<std::shared_ptr<const Batch>> Trainer::NextBatch() {
  absl::Duration every = options_.export_every;
  if (every <= absl::ZeroDuration() && options_.export_every_steps > 0) every = absl::Seconds(1);
  if (!streaming() || every <= absl::ZeroDuration()) return reader_->Next();
  while (true) {
    const absl::Duration left = std::max(every - (absl::Now() - last_export_), absl::Milliseconds(1));
    absl::StatusOr<std::shared_ptr<const Batch>> batch = reader_->Next(left);
    if (!absl::IsDeadlineExceeded(batch.status())) return batch;
    // No batch for as long as an export's interval: the stream waits.
    if (clock_ > 0 && clock_ != periodic_step_) {
      PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
      if (lead) {
        PS_RETURN_IF_ERROR(WaitForLastPush());
        spdlog::info("export: the stream waits for its next partition; exporting step {}", clock_);
        PS_RETURN_IF_ERROR(ExportNow(clock_));
      }
    }
    last_export_ = absl::Now();
  }
}

}  // namespace pstrain::worker
