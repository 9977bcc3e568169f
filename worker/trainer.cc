#include "worker/trainer.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "worker/data/file_set.h"
#include "worker/data/reader.h"
#include "worker/model_io.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {

struct Trainer::Prepared {
  std::shared_ptr<const Batch> batch;
  int epoch = 0;  // data epoch the batch came from
  BatchPlan plan;
  std::vector<std::vector<float>> rows;  // per sparse table: unique x dim
  PullHandle pull;
  std::vector<Buffer> dense;  // pulled dense tables, by position in dense_tables_
};

namespace {

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

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
      process_start_(absl::Now()) {
  for (const TableSpec& t : model_->tables()) {
    if (t.kind == TableKind::kDense && !(replica_ != nullptr && replica_->holds(t.id))) {
      dense_tables_.push_back(t.id);
    }
  }
}

absl::StatusOr<std::unique_ptr<Trainer::Prepared>> Trainer::Prepare(
    std::shared_ptr<const Batch> batch, int64_t clock) {
  auto p = std::make_unique<Prepared>();
  p->batch = std::move(batch);
  model_->Plan(*p->batch, &p->plan);
  const auto& sparse = model_->sparse_tables();
  if (p->plan.lookups.size() != sparse.size()) {
    return absl::InternalError("model plan does not match its sparse tables");
  }
  p->rows.resize(sparse.size());
  std::vector<SparsePull> pulls;
  pulls.reserve(sparse.size());
  for (size_t k = 0; k < sparse.size(); ++k) {
    const TableSpec& spec = model_->tables()[sparse[k]];
    const auto& ids = p->plan.lookups[k].unique_ids;
    p->rows[k].resize(ids.size() * spec.dim);
    pulls.push_back(SparsePull{sparse[k], ids, p->rows[k].data()});
  }
  p->pull = kv_->Pull(dense_tables_, pulls, clock);
  return p;
}

absl::Status Trainer::Bind(Prepared& p, ParamRefs* params) {
  PS_ASSIGN_OR_RETURN(p.dense, p.pull.Wait());
  params->tables.assign(model_->tables().size(), nullptr);
  for (size_t i = 0; i < dense_tables_.size(); ++i) {
    params->tables[dense_tables_[i]] = p.dense[i].as<float>().data();
  }
  const auto& sparse = model_->sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) params->tables[sparse[k]] = p.rows[k].data();
  if (replica_ != nullptr) {
    for (uint32_t t : replica_->table_ids()) params->tables[t] = replica_->params(t);
  }
  return absl::OkStatus();
}

double Trainer::FractionDone(int64_t step, int64_t bytes_read) const {
  if (options_.max_steps > 0) return std::min(1.0, double(step) / double(options_.max_steps));
  if (shard_bytes_ == 0 || options_.epochs <= 0) return NAN;
  return std::min(1.0, double(bytes_read) / (double(shard_bytes_) * options_.epochs));
}

absl::StatusOr<TrainResult> Trainer::Run() {
  PS_RETURN_IF_ERROR(LearnLead());
  PS_ASSIGN_OR_RETURN(metrics_, MetricsFile::Open(lead_ == rank_ ? options_.metrics_out : ""));
  ReaderOptions ro;
  ro.patterns = options_.train_data;
  ro.shard_index = rank_;
  ro.num_shards = num_workers_;
  ro.schema = options_.schema;
  ro.batch_size = options_.batch_size;
  ro.epochs = options_.epochs;
  ro.shuffle_buffer_rows = options_.shuffle_buffer;
  ro.seed = options_.seed + static_cast<uint64_t>(rank_);
  ro.max_bad_lines_fraction = options_.max_bad_lines_fraction;
  PS_ASSIGN_OR_RETURN(auto files, ExpandFilePatterns(ro.patterns));
  for (const FileRange& r : ShardRanges(files, rank_, num_workers_)) shard_bytes_ += r.end - r.begin;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(ro));

  const bool prefetch = kv_->layout().consistency != proto::Consistency::kBsp;
  Progress progress(metrics_.get(), options_.log_every, options_.progress_bar);
  TrainResult result;
  int64_t clock = 0;
  double loss_sum = 0, total_loss = 0;  // since the last report, before it
  int64_t loss_count = 0, total_count = 0;
  int eval_round = 0;
  absl::Time train_start = absl::Now();

  // The batch of step `step` (null past the step budget or the data).
  auto next_batch = [&](int64_t step) -> absl::StatusOr<std::shared_ptr<const Batch>> {
    if (options_.max_steps > 0 && step >= options_.max_steps) return nullptr;
    absl::Time t0 = absl::Now();
    auto b = reader->Next();
    result.data_seconds += Seconds(t0);
    return b;
  };
  // Where this worker stands in its data: the epoch of the last batch
  // trained and the rows of that epoch trained so far (checkpoints).
  proto::WorkerPosition position;
  position.rank = rank_;
  int64_t checkpoint_step = kv_->layout().checkpoint_step;
  PS_RETURN_IF_ERROR(ResumePosition(reader.get(), &position));
  clock = position.clock;
  // Evaluation rounds are numbered by step, so that a worker that starts
  // late (re-admitted, or resumed) gathers under the others' round keys.
  if (options_.eval_every_steps > 0) eval_round = static_cast<int>(clock / options_.eval_every_steps);
  first_round_ = eval_round;
  if (position.finished) {
    spdlog::info("this worker had finished training before the checkpoint");
  }

  std::unique_ptr<Prepared> next;
  if (!position.finished) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> first, next_batch(clock));
    if (first) {
      int epoch = reader->last_epoch();
      PS_ASSIGN_OR_RETURN(next, Prepare(std::move(first), clock));
      next->epoch = epoch;
    }
  }
  PushHandle last_push;
  ParamRefs params;
  GradRefs grads;
  OptimizerConfig warmup;  // the warm-up of the dense replica's steps (allreduce mode)
  warmup.warmup_steps = options_.warmup_steps;
  while (true) {
    if (!next) {
      // Out of data: train what a dead worker left, if any (elastic).
      if (!adopted_.empty()) {
        AdoptedShard& a = adopted_.back();
        spdlog::info("worker {}'s shard done here: {} rows trained after its {} (the shard's {} rows "
                     "were all trained)",
                     a.rank, a.trained_rows, a.skipped_rows, a.skipped_rows + a.trained_rows);
      }
      PS_ASSIGN_OR_RETURN(bool adopted, AdoptShard(ro, &reader));
      if (!adopted) break;
      PS_ASSIGN_OR_RETURN(auto b, next_batch(clock));
      if (b) {
        int epoch = reader->last_epoch();
        PS_ASSIGN_OR_RETURN(next, Prepare(std::move(b), clock));
        next->epoch = epoch;
      }
      continue;
    }
    std::unique_ptr<Prepared> cur = std::move(next);
    if (prefetch) {
      PS_ASSIGN_OR_RETURN(auto b, next_batch(clock + 1));
      if (b) {
        int epoch = reader->last_epoch();
        PS_ASSIGN_OR_RETURN(next, Prepare(std::move(b), clock + 1));
        next->epoch = epoch;
      }
    }
    absl::Time t0 = absl::Now();
    PS_RETURN_IF_ERROR(Bind(*cur, &params));
    if (last_push.valid()) PS_RETURN_IF_ERROR(last_push.Wait());
    result.wait_seconds += Seconds(t0);
    // Every step before this one is on the servers: the position a dead
    // worker's shard would be adopted from.
    if (options_.train_metrics != nullptr && adopted_.empty()) {
      options_.train_metrics->SetPosition(position.epoch, position.rows);
    }

    t0 = absl::Now();
    std::vector<Buffer> grad_buffers(model_->tables().size());
    grads.tables.assign(model_->tables().size(), nullptr);
    for (uint32_t t : dense_tables_) {
      uint8_t* data = nullptr;
      grad_buffers[t] = Buffer::Allocate(model_->tables()[t].size * sizeof(float), &data);
      grads.tables[t] = reinterpret_cast<float*>(data);
    }
    const auto& sparse = model_->sparse_tables();
    for (size_t k = 0; k < sparse.size(); ++k) {
      uint8_t* data = nullptr;
      grad_buffers[sparse[k]] = Buffer::Allocate(cur->rows[k].size() * sizeof(float), &data);
      grads.tables[sparse[k]] = reinterpret_cast<float*>(data);
    }
    if (replica_ != nullptr) {
      replica_->BeginStep();
      for (uint32_t t : replica_->table_ids()) grads.tables[t] = replica_->grad(t);
      grads.on_ready = [this](uint32_t t) { replica_->OnReady(t); };
    }
    PS_ASSIGN_OR_RETURN(StepOutput out, model_->TrainStep(*cur->batch, cur->plan, params, &grads));
    result.compute_seconds += Seconds(t0);

    std::vector<DensePush> dense_push;
    for (uint32_t t : dense_tables_) dense_push.push_back(DensePush{t, grad_buffers[t]});
    std::vector<SparsePush> sparse_push;
    for (size_t k = 0; k < sparse.size(); ++k) {
      sparse_push.push_back(
          SparsePush{sparse[k], cur->plan.lookups[k].unique_ids, grad_buffers[sparse[k]]});
    }
    last_push = kv_->Push(dense_push, sparse_push, static_cast<uint32_t>(out.num_samples), clock);
    if (replica_ != nullptr) {
      // The sparse push travels while the dense buckets finish.
      t0 = absl::Now();
      PS_RETURN_IF_ERROR(
          Annotate(replica_->Finish(static_cast<uint32_t>(out.num_samples), WarmupScale(warmup, clock))
                       .status(),
                   absl::StrCat("allreduce of step ", clock)));
      result.wait_seconds += Seconds(t0);
      result.allreduce_wait_seconds += replica_->last_wait_seconds();
    }
    ++clock;
    if (!adopted_.empty()) {
      adopted_.back().trained_rows += out.num_samples;
    } else {
      if (cur->epoch != position.epoch) {
        position.epoch = cur->epoch;
        position.rows = 0;
      }
      position.rows += out.num_samples;
    }
    position.clock = clock;
    if (clock == checkpoint_step) {
      // Pause for the checkpoint: our gradients must be on the servers.
      if (last_push.valid()) PS_RETURN_IF_ERROR(last_push.Wait());
      absl::Time p0 = absl::Now();
      PS_ASSIGN_OR_RETURN(checkpoint_step, Checkpoint(clock, position));
      result.checkpoint_seconds += Seconds(p0);
    }
    result.samples += out.num_samples;
    loss_sum += out.loss_sum;
    loss_count += out.num_samples;
    if (!std::isfinite(out.loss_sum)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "loss became non-finite at step ", clock, " (learning rate too high?)"));
    }

    if (!prefetch) {
      PS_ASSIGN_OR_RETURN(auto b, next_batch(clock));
      if (b) {
        int epoch = reader->last_epoch();
        PS_ASSIGN_OR_RETURN(next, Prepare(std::move(b), clock));
        next->epoch = epoch;
      }
    }
    ProgressSnapshot snap;
    snap.step = clock;
    snap.samples = result.samples;
    snap.fraction_done = FractionDone(clock, reader->stats().bytes_read);
    snap.interval_loss = loss_count > 0 ? loss_sum / loss_count : 0;
    snap.compute_seconds = result.compute_seconds;
    snap.wait_seconds = result.wait_seconds;
    snap.data_seconds = result.data_seconds;
    if (options_.train_metrics != nullptr) {
      ReaderStats rs = reader->stats();
      options_.train_metrics->OnStep(StepReport{clock, out.num_samples, out.loss_sum,
                                                result.compute_seconds, result.wait_seconds,
                                                result.data_seconds, rs.rows, rs.rows_per_busy_second});
    }
    PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
    if (lead && progress.Update(snap)) {
      total_loss += loss_sum;
      total_count += loss_count;
      loss_sum = 0;
      loss_count = 0;
    }
    if (options_.eval_every_steps > 0 && clock % options_.eval_every_steps == 0 &&
        !options_.eval_data.empty()) {
      if (last_push.valid()) PS_RETURN_IF_ERROR(last_push.Wait());
      PS_RETURN_IF_ERROR(Evaluate(eval_round++, clock, &result, /*final_round=*/false, rank_));
    }
  }
  if (last_push.valid()) PS_RETURN_IF_ERROR(last_push.Wait());
  PS_RETURN_IF_ERROR(kv_->Push({}, {}, 0, clock, /*retire=*/true).Wait());
  if (elastic_) {
    // The lead stops waiting for this worker's parts of later rounds (an
    // adopter trains on past the others).
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(absl::StrCat("trained/", rank_), Buffer::FromString("1")));
  }
  position.finished = true;
  position.clock = clock;
  if (checkpoint_step >= 0 || kv_->layout().restored_step >= 0) {
    // From now on checkpoints do not wait for this worker.
    PS_RETURN_IF_ERROR(Checkpoint(-1, position).status());
  }
  result.steps = clock;
  result.train_seconds = Seconds(train_start);
  total_loss += loss_sum;
  total_count += loss_count;
  result.final_loss = total_count > 0 ? total_loss / total_count : 0;
  ReaderStats rs = reader->stats();
  result.reader_rows_per_sec = rs.rows_per_busy_second;
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
  if (lead) progress.Finish();
  spdlog::info("trained {} steps, {} samples in {:.1f}s (compute {:.1f}s, wait {:.1f}s, data {:.1f}s; "
               "reader {:.0f} rows/s, {} bad lines)",
               result.steps, result.samples, result.train_seconds, result.compute_seconds,
               result.wait_seconds, result.data_seconds, rs.rows_per_busy_second, rs.bad_lines);

  // Everyone finishes training before the final evaluation sees the model.
  PS_RETURN_IF_ERROR(coordinator_->Barrier("trained", num_workers_, absl::Hours(24)));
  if (!options_.eval_data.empty()) {
    // Adopted shards' evaluation rows first: the lead waits for them.
    for (const AdoptedShard& a : adopted_) {
      PS_RETURN_IF_ERROR(Evaluate(eval_round, clock, &result, /*final_round=*/true, a.rank));
    }
    PS_RETURN_IF_ERROR(Evaluate(eval_round, clock, &result, /*final_round=*/true, rank_));
  }
  PS_RETURN_IF_ERROR(FinishRun(clock, eval_round, &result));
  return result;
}

absl::Status Trainer::SaveModel(int64_t step) {
  absl::Time t0 = absl::Now();
  SavedModel saved;
  saved.model = options_.model;
  saved.schema = options_.schema;
  saved.step = step;
  PS_ASSIGN_OR_RETURN(std::vector<Buffer> dense, kv_->Pull(dense_tables_, {}, step).Wait());
  uint64_t rows = 0;
  for (const TableSpec& spec : model_->tables()) {
    TableValues t;
    t.spec = spec;
    if (spec.kind == TableKind::kSparse) {
      PS_RETURN_IF_ERROR(kv_->DumpSparse(spec.id, &t.ids, &t.rows));
      rows += t.ids.size();
    } else if (replica_ != nullptr && replica_->holds(spec.id)) {
      t.dense = replica_->weights(spec.id);
    } else {
      size_t k = std::find(dense_tables_.begin(), dense_tables_.end(), spec.id) - dense_tables_.begin();
      auto v = dense[k].as<float>();
      t.dense.assign(v.begin(), v.end());
    }
    saved.tables.push_back(std::move(t));
  }
  PS_RETURN_IF_ERROR(WriteModel(options_.save_model, saved));
  spdlog::info("model saved to {} ({} tables, {} embedding rows) in {:.1f}s", options_.save_model,
               saved.tables.size(), rows, Seconds(t0));
  return absl::OkStatus();
}

absl::Status Trainer::ResumePosition(DataReader* reader, proto::WorkerPosition* position) {
  const proto::TableLayout& layout = kv_->layout();
  if (layout.restored_step < 0) return absl::OkStatus();
  for (const proto::WorkerPosition& p : layout.positions) {
    if (p.rank == rank_) *position = p;
  }
  position->state_file.clear();
  if (replica_ != nullptr && layout.restored_step > 0) {
    // Worker-held state (allreduce mode) comes from the checkpoint too.
    // (Step 0: a rollback before the first checkpoint; the replica, rebuilt
    // for it, holds the initial values.)
    auto image = coordinator_->StoreGet("restore/worker_state", absl::Minutes(1));
    if (!image.ok()) return Annotate(image.status(), "allreduce state of the checkpoint");
    PS_RETURN_IF_ERROR(replica_->RestoreState(*image));
  }
  // Skip what was trained before the checkpoint: whole batches, so the
  // resumed run sees exactly the data an unbroken one would.
  absl::Time t0 = absl::Now();
  int64_t skipped = 0;
  if (!position->finished) {
    PS_ASSIGN_OR_RETURN(skipped, SkipTo(reader, position->epoch, position->rows));
  }
  spdlog::info("resuming at step {} (epoch {}, {} rows skipped in {:.1f}s)", position->clock,
               position->epoch, skipped, Seconds(t0));
  return absl::OkStatus();
}

void ApplyLrSchedule(const TrainOptions& options, int num_workers, std::vector<TableSpec>* tables) {
  for (TableSpec& t : *tables) {
    if (options.lr_scaling == "linear") t.optimizer.lr *= static_cast<float>(num_workers);
    t.optimizer.warmup_steps = options.warmup_steps;
  }
}

absl::StatusOr<int64_t> Trainer::SkipTo(DataReader* reader, int32_t epoch, int64_t rows) {
  int64_t skipped = 0, in_epoch = 0;
  if (epoch <= 0 && rows <= 0) return skipped;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> b, reader->Next());
    if (!b) break;
    int e = reader->last_epoch();
    in_epoch = e < epoch ? 0 : in_epoch + b->size;
    skipped += b->size;
    if (e == epoch && in_epoch >= rows) break;
  }
  return skipped;
}

absl::StatusOr<bool> Trainer::AdoptShard(const ReaderOptions& base, std::unique_ptr<DataReader>* reader) {
  if (replica_ != nullptr) return false;  // allreduce mode: no elastic workers
  PS_ASSIGN_OR_RETURN(proto::ShardClaim claim, coordinator_->ClaimShard());
  if (claim.rank < 0) return false;
  // The dead worker's reader, read the same way (same shard, same shuffle
  // seed), past what it had trained.
  ReaderOptions ro = base;
  ro.shard_index = claim.rank;
  ro.seed = options_.seed + static_cast<uint64_t>(claim.rank);
  PS_ASSIGN_OR_RETURN(*reader, DataReader::Open(ro));
  PS_ASSIGN_OR_RETURN(int64_t skipped, SkipTo(reader->get(), claim.epoch, claim.rows));
  adopted_.push_back(AdoptedShard{claim.rank, skipped, 0, claim.samples});
  spdlog::warn("adopting the rest of dead worker {}'s shard: epoch {}, after the {} rows it trained",
               claim.rank, claim.epoch, skipped);
  return true;
}

absl::StatusOr<int64_t> Trainer::Checkpoint(int64_t step, const proto::WorkerPosition& position) {
  Buffer state;
  if (replica_ != nullptr && rank_ == 0 && step >= 0) {
    PS_ASSIGN_OR_RETURN(state, replica_->SerializeState());
  }
  PS_ASSIGN_OR_RETURN(proto::CheckpointDone done,
                      coordinator_->CheckpointArrive(step, position, std::move(state)));
  if (step >= 0 && lead_ == rank_) {
    if (done.path.empty()) {
      spdlog::warn("checkpoint at step {} failed on the coordinator; training goes on", step);
    } else {
      spdlog::info("checkpoint at step {}: {}", step, done.path);
    }
  }
  return done.next_step;
}

absl::Status Trainer::Evaluate(int round, int64_t clock, TrainResult* result, bool final_round,
                              int shard) {
  ReaderOptions ro;
  ro.patterns = options_.eval_data;
  ro.shard_index = shard;
  ro.num_shards = num_workers_;
  ro.schema = options_.schema;
  ro.batch_size = options_.eval_batch_size;
  ro.epochs = 1;
  ro.max_bad_lines_fraction = options_.max_bad_lines_fraction;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(ro));
  std::vector<float> probs, labels;
  ParamRefs params;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> b, reader->Next());
    if (!b) break;
    PS_ASSIGN_OR_RETURN(auto p, Prepare(b, clock));
    PS_RETURN_IF_ERROR(Bind(*p, &params));
    size_t at = probs.size();
    probs.resize(at + b->size);
    PS_RETURN_IF_ERROR(model_->Predict(*b, p->plan, params, std::span<float>(probs).subspan(at)));
    labels.insert(labels.end(), b->labels.begin(), b->labels.end());
  }
  return Gather(round, probs, labels, result, clock, final_round, shard);
}

}  // namespace pstrain::worker
