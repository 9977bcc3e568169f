#include "worker/trainer.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/file_set.h"
#include "data/reader.h"
#include "serve/model_io.h"
#include "worker/eval/eval_blob.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {

namespace {

// The coordinator stores a checkpoint's worker state before it publishes the
// layout that restores it: it is there at once; a minute covers a slow reply.
constexpr absl::Duration kRestoreStateTimeout = absl::Minutes(1);

// A restored position that had finished goes on into the epochs a rerun
// with more --epochs adds (not a stream's: its epochs are partitions).
int EpochsToGoOn(const TrainOptions& options) {
  return options.train_stream.dir.empty() ? options.epochs : 0;
}

}  // namespace

Trainer::Trainer(TrainOptions options, Model* model, KvClient* kv, CoordinatorClient* coordinator,
                 int rank, int num_workers, DenseReplica* replica)
    : options_(std::move(options)),
      model_(model),
      kv_(kv),
      coordinator_(coordinator),
      rank_(rank),
      num_workers_(num_workers),
      replica_(replica),
      process_start_(absl::Now()),
      loop_(&kv->layout(), coordinator, rank),
      pending_partitions_(options_.pending_partitions != nullptr ? options_.pending_partitions
                                                                 : &own_pending_) {
  for (const TableSpec& t : model_->tables()) {
    if (t.kind == TableKind::kDense && !(replica_ != nullptr && replica_->holds(t.id))) {
      dense_tables_.push_back(t.id);
    }
  }
  warmup_.warmup_steps = options_.warmup_steps;
  warmup_.decay_start = options_.lr_decay_start;
  warmup_.decay_steps = options_.lr_decay_steps;
  warmup_.decay_end = options_.lr_decay_end;
}

Trainer::~Trainer() = default;

double Trainer::FractionDone(int64_t step, const ReaderStats& reader) const {
  if (options_.max_steps > 0) return std::min(1.0, double(step) / double(options_.max_steps));
  if (shard_bytes_ == 0 || options_.epochs <= 0 || streaming() || !adopted_.empty()) return NAN;
  // Rows of an epoch: counted once the first is over; before, estimated
  // from the bytes read so far (the reader reads ahead by its buffer, so
  // the estimate runs a little low and the fraction a little high).
  double rows_per_epoch = 0;
  if (std::vector<int64_t> per_epoch = reader_->RowsDeliveredPerEpoch();
      per_epoch.size() > 1 && per_epoch[0] > 0) {
    rows_per_epoch = static_cast<double>(per_epoch[0]);
  } else if (reader.bytes_read > 0) {
    rows_per_epoch = static_cast<double>(reader.rows_delivered) * static_cast<double>(shard_bytes_) /
                     static_cast<double>(std::min<uint64_t>(reader.bytes_read, shard_bytes_));
  }
  if (rows_per_epoch <= 0) return NAN;
  const proto::WorkerPosition& at = loop_.position();
  const double done = at.epoch * rows_per_epoch + static_cast<double>(at.rows);
  return std::min(1.0, done / (rows_per_epoch * options_.epochs));
}

absl::StatusOr<TrainResult> Trainer::Run() {
  PS_RETURN_IF_ERROR(LearnLead());
  PS_ASSIGN_OR_RETURN(metrics_, MetricsFile::Open(lead_ == rank_ ? options_.metrics_out : ""));
  if (options_.keep_best || options_.early_stop_rounds > 0) {
    best_.emplace(options_.keep_best.value_or(EvalMetric::kAuc), options_.early_stop_rounds);
    if (lead_ == rank_) PS_RETURN_IF_ERROR(LoadBest());
  }
  schedule_ = EvalSchedule(options_.eval_every_steps, options_.eval_every_epochs, options_.epochs);
  PS_RETURN_IF_ERROR(OpenReader());
  prefetch_ = kv_->layout().consistency != proto::Consistency::kBsp;
  // SSP: a pull may wait for the slowest worker; the push it carried would
  // wait with it. Allreduce mode: the sparse push travels while the dense
  // buckets are summed.
  hold_pushes_ = options_.push_with_pull && replica_ == nullptr &&
                 kv_->layout().consistency != proto::Consistency::kSsp;
  progress_ = std::make_unique<Progress>(metrics_.get(), options_.log_every, options_.progress_bar);
  train_start_ = absl::Now();
  last_export_ = train_start_;
  PS_RETURN_IF_ERROR(StartAt());
  PS_RETURN_IF_ERROR(PickUpUnwrittenPartitions());
  while (true) {
    if (stop_) {
      // Early stop: the batch read ahead is not trained.
      next_.reset();
      break;
    }
    if (!next_) {
      // Out of data: train what a dead worker left, if any (elastic).
      PS_RETURN_IF_ERROR(WaitForLastPush());
      PS_ASSIGN_OR_RETURN(bool adopted, AdoptShard());
      if (!adopted) break;
      PS_ASSIGN_OR_RETURN(next_, NextPrepared(clock_));
      continue;
    }
    PS_RETURN_IF_ERROR(RunStep());
  }
  PS_RETURN_IF_ERROR(JoinIdleSteps());
  PS_RETURN_IF_ERROR(FinishTraining());

  // Everyone finishes training before the final evaluation sees the model.
  PS_RETURN_IF_ERROR(WaitForOthersToTrain());
  PS_ASSIGN_OR_RETURN(job_steps_, JobSteps());
  if (streaming()) PS_RETURN_IF_ERROR(CollectPartitions(/*final=*/true));
  absl::Status eval_status = options_.eval_data.empty() ? absl::OkStatus() : FinalEvaluation();
  PS_RETURN_IF_ERROR(FinishRun(job_steps_, std::max(eval_round_, next_collect_),
                               std::move(eval_status), &result_));
  return result_;
}

absl::Status Trainer::OpenReader() {
  ReaderOptions& ro = reader_options_;
  ro.patterns = options_.train_data;
  ro.stream = options_.train_stream;
  if (streaming()) ro.patterns.clear();
  ro.shard_index = rank_;
  ro.num_shards = num_workers_;
  ro.schema = options_.schema;
  ro.batch_size = options_.batch_size;
  ro.epochs = options_.epochs;
  ro.shuffle_buffer_rows = options_.shuffle_buffer;
  ro.reader_threads = options_.reader_threads;
  ro.seed = options_.seed + static_cast<uint64_t>(rank_);
  ro.max_bad_lines_fraction = options_.max_bad_lines_fraction;
  std::string inputs;
  std::vector<std::string> range_files;  // the file of each range of the shard
  if (!streaming()) {
    PS_ASSIGN_OR_RETURN(auto files, ExpandFilePatterns(ro.patterns));
    for (const FileRange& r : ShardRanges(files, rank_, num_workers_)) {
      shard_bytes_ += r.end - r.begin;
      range_files.push_back(files[r.file].path);
    }
    inputs = DescribeInputs(files, rank_, num_workers_);
  }
  // A resumed worker's reader starts at its position's epoch (the earlier
  // ones are not read again), and where its reader knew the position in
  // the shard (a Parquet row group and row, a text line's offset, or a
  // file's start) and reads the same files the same way, there: the rows
  // before it are not read.
  ro.start = SourcePosition{};
  if (std::optional<proto::WorkerPosition> p = loop_.RestoredPosition(EpochsToGoOn(options_));
      p && !p->finished) {
    ro.first_epoch = p->epoch;
    if (p->source_range >= 0 && !p->inputs.empty() && p->inputs == inputs &&
        ro.shuffle_buffer_rows == 0 && ro.reader_threads == 1) {
      // (The file as this run names it: the same files may have moved.)
      const size_t r = static_cast<size_t>(p->source_range);
      ro.start = SourcePosition{p->source_range, p->source_row_group, p->source_row,
                                p->source_offset, r < range_files.size() ? range_files[r] : ""};
    }
  }
  PS_ASSIGN_OR_RETURN(reader_, DataReader::Open(ro));
  return absl::OkStatus();
}

absl::Status Trainer::StartAt() {
  PS_RETURN_IF_ERROR(ResumePosition());
  const proto::WorkerPosition& start = loop_.position();
  clock_ = start.clock;
  resumed_samples_ = start.samples;
  // Evaluation rounds are numbered by where they fall, so that a worker
  // that starts late (re-admitted, or resumed) gathers under the others'
  // round keys.
  eval_round_ = schedule_.FirstRound(clock_, start.epoch);
  first_round_ = eval_round_;
  next_collect_ = eval_round_;
  if (options_.readmitted) {
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(absl::StrCat("resumed/", rank_),
                                              Buffer::FromString(std::to_string(clock_))));
  }
  if (start.finished) {
    spdlog::info("this worker had finished training before the checkpoint");
    return absl::OkStatus();
  }
  PS_ASSIGN_OR_RETURN(next_, NextPrepared(clock_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Trainer::Prepared>> Trainer::NextPrepared(int64_t step,
                                                                         bool* none_ready,
                                                                         bool issue) {
  if (options_.max_steps > 0 && step >= options_.max_steps) return nullptr;
  absl::Time t0 = absl::Now();
  auto batch = none_ready != nullptr ? reader_->Next(absl::ZeroDuration()) : NextBatch();
  result_.data_seconds += SecondsSince(t0);
  if (none_ready != nullptr && absl::IsDeadlineExceeded(batch.status())) {
    *none_ready = true;
    return nullptr;
  }
  if (!batch.ok()) return batch.status();
  if (*batch == nullptr) return nullptr;
  int epoch = reader_->last_epoch();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Prepared> p, Prepare(*std::move(batch), step, false));
  p->epoch = epoch;
  if (issue) IssuePull(*p);
  return p;
}

absl::Status Trainer::RunStep() {
  std::shared_ptr<Prepared> cur = std::move(next_);
  if (!cur->pull.valid()) IssuePull(*cur);  // read ahead, its pull not sent yet
  bool fetch_after = !prefetch_;
  // BSP, pushes held: the next batch read and planned now, its pull sent
  // with this step's push as soon as that is ready.
  const bool read_ahead = !prefetch_ && hold_pushes_ && !streaming();
  if (prefetch_) {
    // The next step's pull travels while this one computes (with the last
    // step's push). A stream with no batch ready (it may wait for its next
    // partition): this step first, so that an export while the stream
    // waits holds it.
    PS_ASSIGN_OR_RETURN(next_, NextPrepared(clock_ + 1, streaming() ? &fetch_after : nullptr));
  } else if (read_ahead) {
    PS_ASSIGN_OR_RETURN(next_, NextPrepared(clock_ + 1, nullptr, /*issue=*/false));
    fetch_after = false;
  }
  absl::Time t0 = absl::Now();
  PS_RETURN_IF_ERROR(Bind(*cur, &params_));
  result_.wait_seconds += SecondsSince(t0);

  t0 = absl::Now();
  std::vector<Buffer> grad_buffers = BindGrads(*cur);
  PS_ASSIGN_OR_RETURN(StepOutput out, model_->TrainStep(*cur->batch, cur->plan, params_, &grads_));
  result_.compute_seconds += SecondsSince(t0);
  // The last step's push, applied on the servers while this one computed.
  t0 = absl::Now();
  PS_RETURN_IF_ERROR(WaitForLastPush());
  result_.wait_seconds += SecondsSince(t0);
  // Every step before this one is on the servers: the position a dead
  // worker's shard would be adopted from.
  if (options_.train_metrics != nullptr && adopted_.empty()) {
    options_.train_metrics->SetPosition(loop_.position().epoch, loop_.position().rows);
  }
  PS_RETURN_IF_ERROR(PushGrads(*cur, grad_buffers, out));
  if (held_push_) held_push_->keep = cur;
  PS_RETURN_IF_ERROR(AccountStep(*cur, out));

  if (read_ahead && next_ != nullptr) IssuePull(*next_);
  if (fetch_after) {
    // BSP: the pull of the next step follows this step's push. A stream
    // may wait for its next partition: the push leaves first.
    if (streaming()) PS_RETURN_IF_ERROR(WaitForLastPush());
    PS_ASSIGN_OR_RETURN(next_, NextPrepared(clock_));
  }
  PS_RETURN_IF_ERROR(ReportStep(out));
  if (!pending_partitions_->empty() && absl::Now() - partitions_looked_ >= absl::Seconds(1)) {
    // At most a look a second: the others' parts come in their own time.
    partitions_looked_ = absl::Now();
    PS_RETURN_IF_ERROR(CollectPartitions(/*final=*/false));
  }
  PS_RETURN_IF_ERROR(EvaluateIfDue(cur->epoch));
  const bool by_steps = options_.export_every_steps > 0 && clock_ % options_.export_every_steps == 0;
  const bool by_time = options_.export_every > absl::ZeroDuration() &&
                       absl::Now() - last_export_ >= options_.export_every;
  if (by_steps || by_time) {
    PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
    if (lead) {
      PS_RETURN_IF_ERROR(WaitForLastPush());
      PS_RETURN_IF_ERROR(ExportNow(clock_));
    }
    last_export_ = absl::Now();  // the others: the next look in as long
  }
  return absl::OkStatus();
}

absl::Status Trainer::AccountStep(const Prepared& p, const StepOutput& out) {
  ++clock_;
  if (!adopted_.empty()) {
    adopted_.back().trained_rows += out.num_samples;
  } else {
    if (streaming() && p.epoch != loop_.position().epoch) {
      PS_RETURN_IF_ERROR(ClosePartitions(p.epoch));
    }
    loop_.CountRows(p.epoch, out.num_samples, p.batch->end);
    ScoreRows(*p.batch, out);
  }
  loop_.CountSamples(out.num_samples);
  if (loop_.Reached(clock_)) {
    // Pause for the checkpoint: our gradients must be on the servers.
    PS_RETURN_IF_ERROR(WaitForLastPush());
    absl::Time t0 = absl::Now();
    PS_RETURN_IF_ERROR(Checkpoint());
    result_.checkpoint_seconds += SecondsSince(t0);
  }
  result_.samples += out.num_samples;
  loss_sum_ += out.loss_sum;
  loss_count_ += out.num_samples;
  return TrainingLoop::CheckLoss(out.loss_sum, clock_);
}

absl::Status Trainer::ReportStep(const StepOutput& out) {
  ProgressSnapshot snap;
  snap.step = clock_;
  snap.samples = result_.samples;
  snap.fraction_done = FractionDone(clock_, reader_->stats());
  snap.interval_loss = loss_count_ > 0 ? loss_sum_ / loss_count_ : 0;
  snap.compute_seconds = result_.compute_seconds;
  snap.wait_seconds = result_.wait_seconds;
  snap.data_seconds = result_.data_seconds;
  snap.epoch = loop_.position().epoch;
  snap.epochs = streaming() ? 0 : options_.epochs;
  snap.workers = num_workers_;
  snap.eval_auc = last_eval_auc_;
  snap.eval_step = last_eval_step_;
  if (options_.train_metrics != nullptr) {
    ReaderStats rs = reader_->stats();
    options_.train_metrics->OnStep(StepReport{clock_, out.num_samples, out.loss_sum,
                                              result_.compute_seconds, result_.wait_seconds,
                                              result_.data_seconds, rs.rows, rs.rows_per_busy_second});
  }
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
  if (lead && progress_->Update(snap)) {
    total_loss_ += loss_sum_;
    total_count_ += loss_count_;
    loss_sum_ = 0;
    loss_count_ = 0;
  }
  return absl::OkStatus();
}

absl::Status Trainer::RetireFromServers() {
  if (retired_) return absl::OkStatus();
  retired_ = true;
  PS_RETURN_IF_ERROR(WaitForLastPush());
  PS_RETURN_IF_ERROR(FinishPartitions());
  PS_RETURN_IF_ERROR(kv_->Push({}, {}, 0, clock_, /*retire=*/true).Wait());
  // Stored after this worker's last part of a round: from now on the lead
  // scores this worker's evaluation share itself.
  return coordinator_->StoreSet(absl::StrCat("trained/", rank_),
                                Buffer::FromString(std::to_string(clock_)));
}

absl::Status Trainer::FinishTraining() {
  PS_RETURN_IF_ERROR(RetireFromServers());
  // From now on checkpoints do not wait for this worker.
  PS_RETURN_IF_ERROR(loop_.ArriveFinished(clock_));
  result_.steps = clock_;
  result_.train_seconds = SecondsSince(train_start_);
  total_loss_ += loss_sum_;
  total_count_ += loss_count_;
  result_.final_loss = total_count_ > 0 ? total_loss_ / total_count_ : 0;
  ReaderStats rs = reader_->stats();
  result_.reader_rows_per_sec = rs.rows_per_busy_second;
  result_.early_stopped = stop_;
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
  if (lead) progress_->Finish();
  if (stop_) {
    spdlog::info("early stop: training ended at step {} (epoch {} of {}), {} evaluations after the "
                 "best one",
                 clock_, loop_.position().epoch + 1, options_.epochs, options_.early_stop_rounds);
  }
  spdlog::info("trained {} steps, {} samples in {:.1f}s (compute {:.1f}s, wait {:.1f}s, data {:.1f}s; "
               "reader {:.0f} rows/s, {} bad lines)",
               result_.steps, result_.samples, result_.train_seconds, result_.compute_seconds,
               result_.wait_seconds, result_.data_seconds, rs.rows_per_busy_second, rs.bad_lines);
  return absl::OkStatus();
}

absl::Status Trainer::SaveModel(int64_t step, const EvalRound* chosen) {
  absl::Time t0 = absl::Now();
  SavedModel saved;
  saved.model = options_.model;
  saved.schema = options_.schema;
  saved.step = step;
  if (chosen != nullptr) {
    saved.chosen = ModelChoice{EvalMetricName(best_->metric()), chosen->round, chosen->step,
                               chosen->auc, chosen->logloss};
  }
  uint64_t rows = 0;
  PS_RETURN_IF_ERROR(CollectTables(step, proto::DumpRequest{}, &saved, &rows));
  std::string in_place;
  PS_RETURN_IF_ERROR(Annotate(ReplaceModel(options_.save_model, saved, &in_place),
                              absl::StrCat("saving the model to ", options_.save_model)));
  if (!in_place.empty()) {
    spdlog::warn("{} could not be replaced in one step ({}): the model was written into it file "
                 "by file",
                 options_.save_model, in_place);
  }
  // A round kept by --keep_best says so itself.
  spdlog::log(chosen != nullptr ? spdlog::level::debug : spdlog::level::info,
              "model of step {} saved to {} ({} tables, {} embedding rows) in {:.1f}s", step,
              options_.save_model, saved.tables.size(), rows, SecondsSince(t0));
  return absl::OkStatus();
}

absl::Status Trainer::ResumePosition() {
  const proto::TableLayout& layout = kv_->layout();
  if (!loop_.restored()) return loop_.Resume(reader_.get(), 0).status();  // the first checkpoint step
  if (replica_ != nullptr && layout.restored_step > 0) {
    // Worker-held state (allreduce mode) comes from the checkpoint too.
    // (Step 0: a rollback before the first checkpoint; the replica, rebuilt
    // for it, holds the initial values.)
    auto image = coordinator_->StoreGet("restore/worker_state", kRestoreStateTimeout);
    if (!image.ok()) return Annotate(image.status(), "allreduce state of the checkpoint");
    PS_RETURN_IF_ERROR(replica_->RestoreState(*image));
  }
  // Skip what was trained before the checkpoint: whole batches, so the
  // resumed run sees exactly the data an unbroken one would.
  absl::Time t0 = absl::Now();
  const bool at_position = reader_options_.start.known();
  PS_ASSIGN_OR_RETURN(int64_t skipped,
                      loop_.Resume(reader_.get(), EpochsToGoOn(options_), at_position));
  const proto::WorkerPosition& at = loop_.position();
  if (at_position) {
    spdlog::info("resuming at step {} (epoch {}): reading from {}, the {} rows before it not read "
                 "again",
                 at.clock, at.epoch, DescribePosition(reader_options_.start), skipped);
  } else {
    spdlog::info("resuming at step {} (epoch {}, {} rows skipped in {:.1f}s)", at.clock, at.epoch,
                 skipped, SecondsSince(t0));
  }
  return absl::OkStatus();
}

void ApplyLrSchedule(const TrainOptions& options, int num_workers, std::vector<TableSpec>* tables) {
  for (TableSpec& t : *tables) {
    if (options.lr_scaling == "linear") t.optimizer.lr *= static_cast<float>(num_workers);
    t.optimizer.warmup_steps = options.warmup_steps;
    t.optimizer.decay_start = options.lr_decay_start;
    t.optimizer.decay_steps = options.lr_decay_steps;
    t.optimizer.decay_end = options.lr_decay_end;
    if (t.kind == TableKind::kSparse) {
      t.admission = options.admission;
      t.eviction = options.eviction;
      t.dtype = options.embedding_dtype;
      t.zero_untrained = options.zero_untrained;
    }
  }
}

absl::StatusOr<bool> Trainer::AdoptShard() {
  if (!adopted_.empty()) {
    AdoptedShard& a = adopted_.back();
    spdlog::info("worker {}'s shard done here: {} rows trained after its {} (the shard's {} rows "
                 "were all trained)",
                 a.rank, a.trained_rows, a.skipped_rows, a.skipped_rows + a.trained_rows);
  }
  if (replica_ != nullptr) return false;  // allreduce mode: no elastic workers
  PS_ASSIGN_OR_RETURN(proto::ShardClaim claim, coordinator_->ClaimShard());
  if (claim.rank < 0) return false;
  // The dead worker's reader, read the same way (same shard, same shuffle
  // seed), past what it had trained.
  ReaderOptions ro = reader_options_;
  ro.shard_index = claim.rank;
  ro.seed = options_.seed + static_cast<uint64_t>(claim.rank);
  ro.first_epoch = std::max(0, claim.epoch);  // its position's, not this worker's
  ro.start = SourcePosition{};  // from its epoch's start (this worker's own may be set)
  PS_ASSIGN_OR_RETURN(reader_, DataReader::Open(ro));
  PS_ASSIGN_OR_RETURN(int64_t skipped, TrainingLoop::SkipTo(reader_.get(), claim.epoch, claim.rows));
  adopted_.push_back(AdoptedShard{claim.rank, skipped, 0, claim.samples});
  spdlog::warn("adopting the rest of dead worker {}'s shard: epoch {}, after the {} rows it trained",
               claim.rank, claim.epoch, skipped);
  return true;
}

absl::Status Trainer::Checkpoint() {
  Buffer state;
  if (replica_ != nullptr && rank_ == 0) {
    PS_ASSIGN_OR_RETURN(state, replica_->SerializeState());
  }
  return loop_.Checkpoint(std::move(state), /*log=*/lead_ == rank_);
}

absl::Status Trainer::Score(int shard, int64_t clock, std::vector<float>* probs,
                            std::vector<float>* labels) {
  ReaderOptions ro;
  ro.patterns = options_.eval_data;
  ro.shard_index = shard;
  ro.num_shards = num_workers_;
  ro.schema = options_.schema;
  ro.batch_size = options_.eval_batch_size;
  ro.epochs = 1;
  ro.max_bad_lines_fraction = options_.max_bad_lines_fraction;
  ro.reader_threads = options_.reader_threads;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(ro));
  ParamRefs params;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> b, reader->Next());
    if (!b) break;
    PS_ASSIGN_OR_RETURN(auto p, Prepare(b, clock));
    PS_RETURN_IF_ERROR(Bind(*p, &params));
    // [rows x heads]: each head's prediction and label.
    const std::vector<ModelHead>& heads = model_->heads();
    size_t at = probs->size();
    probs->resize(at + static_cast<size_t>(b->size) * heads.size());
    PS_RETURN_IF_ERROR(model_->Predict(*b, p->plan, params, std::span<float>(*probs).subspan(at)));
    AppendHeadLabels(*b, heads, labels);
  }
  return absl::OkStatus();
}

int Trainer::NextEpoch() const { return next_ != nullptr ? next_->epoch : -1; }

}  // namespace pstrain::worker
