#include "worker/pipeline/pipeline_trainer.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/reader.h"
#include "worker/eval/eval_blob.h"
#include "worker/eval/eval_schedule.h"
#include "data/eval/metrics.h"
#include "worker/run_report.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {

struct PipelineTrainer::Prepared {
  std::shared_ptr<const Batch> batch;  // stage 0
  int data_epoch = 0;                  // stage 0: the reader's epoch of `batch`
  BatchPlan plan;
  std::vector<std::vector<float>> rows;  // per sparse table: unique x dim
  PullHandle pull;
  std::vector<Buffer> dense;  // by position in runner_->dense_tables()
};

namespace {

ReaderOptions ShardReader(const TrainOptions& o, const std::vector<std::string>& files, int shard,
                          int shards, int batch, int epochs) {
  ReaderOptions ro;
  ro.patterns = files;
  ro.shard_index = shard;
  ro.num_shards = shards;
  ro.schema = o.schema;
  ro.batch_size = batch;
  ro.epochs = epochs;
  ro.seed = o.seed + static_cast<uint64_t>(shard);
  ro.max_bad_lines_fraction = o.max_bad_lines_fraction;
  return ro;
}

}  // namespace

PipelineTrainer::PipelineTrainer(TrainOptions options, PipelineOptions pipeline, Model* model,
                                 StageRunner* runner, PipeComm* comm, KvClient* kv,
                                 CoordinatorClient* coordinator, int rank,
                                 const std::vector<TableSpec>* tables)
    : options_(std::move(options)),
      pipeline_(pipeline),
      model_(model),
      runner_(runner),
      comm_(comm),
      kv_(kv),
      coordinator_(coordinator),
      rank_(rank),
      tables_(tables != nullptr ? tables : &model->tables()),
      place_(PlaceOf3d(rank, pipeline.stages, pipeline.tensor_parallel)),
      loop_(&kv->layout(), coordinator, rank),
      process_start_(absl::Now()) {
  const size_t n = tables_->size();
  grad_buffers_.resize(n);
  grad_data_.assign(n, nullptr);
  grad_floats_.assign(n, 0);
}

PipelineTrainer::~PipelineTrainer() = default;

absl::StatusOr<std::unique_ptr<PipelineTrainer::Prepared>> PipelineTrainer::Prepare(
    std::shared_ptr<const Batch> batch, int64_t clock, bool with_dense) {
  auto p = std::make_unique<Prepared>();
  std::vector<SparsePull> pulls;
  if (batch != nullptr) {
    p->batch = std::move(batch);
    model_->Plan(*p->batch, &p->plan);
    const auto& sparse = model_->sparse_tables();
    p->rows.resize(sparse.size());
    for (size_t k = 0; k < sparse.size(); ++k) {
      const auto& ids = p->plan.lookups[k].unique_ids;
      p->rows[k].resize(ids.size() * model_->tables()[sparse[k]].dim);
      pulls.push_back(SparsePull{sparse[k], ids, p->rows[k].data()});
    }
  }
  p->pull = kv_->Pull(with_dense ? runner_->dense_tables() : std::vector<uint32_t>{}, pulls, clock);
  return p;
}

absl::Status PipelineTrainer::BindParams(Prepared& p, ParamRefs* params) {
  PS_ASSIGN_OR_RETURN(std::vector<Buffer> dense, p.pull.Wait());
  if (!dense.empty()) p.dense = std::move(dense);
  const auto& tables = runner_->dense_tables();
  if (p.dense.size() != tables.size()) return absl::InternalError("dense tables not pulled");
  params->tables.assign(tables_->size(), nullptr);
  for (size_t i = 0; i < tables.size(); ++i) {
    params->tables[tables[i]] = p.dense[i].as<float>().data();
  }
  if (p.batch != nullptr) {
    const auto& sparse = model_->sparse_tables();
    for (size_t k = 0; k < sparse.size(); ++k) params->tables[sparse[k]] = p.rows[k].data();
  }
  return absl::OkStatus();
}

void PipelineTrainer::BindGrads(const Prepared* p, GradRefs* grads) {
  grads->tables.assign(tables_->size(), nullptr);
  auto bind = [&](uint32_t t, size_t floats) {
    Buffer& b = grad_buffers_[t];
    // Reuse the buffer once the transport has let go of the last push.
    if (b.empty() || b.owner().use_count() > 1 || grad_floats_[t] < floats) {
      uint8_t* data = nullptr;
      b = Buffer::Allocate(sizeof(float) * std::max<size_t>(floats, 1), &data);
      grad_data_[t] = reinterpret_cast<float*>(data);
      grad_floats_[t] = std::max<size_t>(floats, 1);
    }
    grads->tables[t] = grad_data_[t];
  };
  for (uint32_t t : runner_->dense_tables()) bind(t, (*tables_)[t].size);
  if (p != nullptr && p->batch != nullptr) {
    const auto& sparse = model_->sparse_tables();
    for (size_t k = 0; k < sparse.size(); ++k) bind(sparse[k], p->rows[k].size());
  }
}

PushHandle PipelineTrainer::PushGrads(const Prepared* p, uint32_t rows, int64_t clock) {
  // Under BSP a server divides by the samples of every push of the step,
  // and each of the P x T workers of a replica pushes `rows`: scale by
  // P x T to compensate.
  const float scale =
      bsp_ ? static_cast<float>(pipeline_.stages * pipeline_.tensor_parallel) : 1.0f;
  auto slice = [&](uint32_t t, size_t floats) {
    if (scale != 1.0f) {
      for (size_t i = 0; i < floats; ++i) grad_data_[t][i] *= scale;
    }
    return grad_buffers_[t].Slice(0, sizeof(float) * floats);
  };
  std::vector<DensePush> dense;
  for (uint32_t t : runner_->pushed_tables()) {
    dense.push_back(DensePush{t, slice(t, (*tables_)[t].size)});
  }
  std::vector<SparsePush> sparse;
  if (p != nullptr && p->batch != nullptr && runner_->pushes_sparse()) {
    const auto& ids = model_->sparse_tables();
    for (size_t k = 0; k < ids.size(); ++k) {
      sparse.push_back(
          SparsePush{ids[k], p->plan.lookups[k].unique_ids, slice(ids[k], p->rows[k].size())});
    }
  }
  return kv_->Push(dense, sparse, rows, clock);
}

void PipelineTrainer::AfterStep(const StageStepStats& stats) {
  result_.train.steps += 1;
  result_.train.samples += stats.rows;
  result_.train.compute_seconds += stats.busy_seconds;
  if (runner_->first() || runner_->last()) {
    loss_sum_ += stats.loss_sum;
    loss_rows_ += stats.rows;
  }
  if (rank_ == 0 && stats_ != nullptr) stats_->AddStep(stats.reports);
  if (options_.train_metrics != nullptr) {
    // Middle stages never see the loss: NaN reads as "not known".
    const bool knows_loss = runner_->first() || runner_->last();
    options_.train_metrics->OnStep(StepReport{
        result_.train.steps, stats.rows, knows_loss ? stats.loss_sum : NAN,
        result_.train.compute_seconds, result_.train.wait_seconds, result_.train.data_seconds, 0, 0});
  }
  if (absl::Now() - last_log_ < options_.log_every) return;
  const double interval = SecondsSince(last_log_);
  const double rate = (result_.train.samples - logged_samples_) / std::max(1e-9, interval);
  const double loss = loss_rows_ > 0 ? loss_sum_ / loss_rows_ : 0;
  // The loss is known on the last stage and, with the gradients, on stage 0.
  const std::string loss_text =
      runner_->first() || runner_->last() ? absl::StrFormat(" | loss %.4f", loss) : "";
  spdlog::info(
      "stage {} of replica {}: step {} | {:.0f} samples/s{} | busy {:.1f}s, waiting for "
      "neighbours {:.1f}s, max {} micro-batches held",
      place_.stage, place_.replica, result_.train.steps, rate, loss_text, runner_->busy_seconds(),
      comm_ != nullptr ? comm_->wait_seconds() : 0.0, runner_->max_live_microbatches());
  if (rank_ == 0 && stats_ != nullptr) {
    spdlog::info("pipeline: {}", stats_->LogLine());
    JsonLine line;
    line.Add("event", "progress")
        .Add("step", result_.train.steps)
        .Add("samples", result_.train.samples)
        .Add("loss", loss)
        .Add("samples_per_sec", rate)
        .Add("elapsed_seconds", SecondsSince(process_start_))
        .Add("compute_seconds", result_.train.compute_seconds)
        .Add("wait_seconds", result_.train.wait_seconds)
        .Add("data_seconds", result_.train.data_seconds)
        .AddRaw("pipeline", stats_->Json());
    metrics_->Write(line);
  }
  total_loss_ += loss_sum_;
  total_rows_ += loss_rows_;
  loss_sum_ = 0;
  loss_rows_ = 0;
  logged_samples_ = result_.train.samples;
  last_log_ = absl::Now();
}

absl::Status PipelineTrainer::SendMarker(proto::PipePhase phase, int64_t step) {
  proto::PipeTransfer t;
  t.phase = phase;
  t.step = step;
  return comm_->Send(PipeDir::kNext, std::move(t), {});
}

absl::Status PipelineTrainer::FinishTraining(int64_t clock) {
  if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
  if (comm_ != nullptr && !runner_->last()) {
    PS_RETURN_IF_ERROR(SendMarker(proto::PipePhase::kTrainEnd, clock));
  }
  PS_RETURN_IF_ERROR(kv_->Push({}, {}, 0, clock, /*retire=*/true).Wait());
  PS_RETURN_IF_ERROR(loop_.ArriveFinished(clock));
  result_.train.train_seconds = runner_->first_step_start() == absl::InfinitePast()
                                    ? 0
                                    : SecondsSince(runner_->first_step_start());
  total_loss_ += loss_sum_;
  total_rows_ += loss_rows_;
  loss_sum_ = 0;
  loss_rows_ = 0;
  result_.train.final_loss = total_rows_ > 0 ? total_loss_ / total_rows_ : 0;
  spdlog::info(
      "stage {} of replica {}: trained {} steps, {} samples in {:.1f}s (busy {:.1f}s, waiting "
      "for neighbours {:.1f}s, {:.1f} MB sent, at most {} micro-batches held)",
      place_.stage, place_.replica, clock, result_.train.samples, result_.train.train_seconds,
      runner_->busy_seconds(), comm_ != nullptr ? comm_->wait_seconds() : 0.0,
      comm_ != nullptr ? comm_->bytes_sent() / 1e6 : 0.0, runner_->max_live_microbatches());
  return coordinator_->WaitAtBarrier(
      "pipeline/trained", pipeline_.stages * pipeline_.replicas * pipeline_.tensor_parallel,
      options_.finish_timeout, absl::StrCat("the other stages to finish training (this one ended at step ",
                                            clock, ")"));
}

absl::Status PipelineTrainer::RunFirstStage() {
  PS_ASSIGN_OR_RETURN(auto reader, DataReader::Open(ShardReader(
                                       options_, options_.train_data, place_.replica,
                                       pipeline_.replicas, options_.batch_size, options_.epochs)));
  const bool prefetch = !bsp_;
  // Step 0, or the restored checkpoint's (the reader past what it trained).
  PS_ASSIGN_OR_RETURN(int64_t clock, Resume(reader.get()));
  // Evaluation rounds are numbered by step, so a resumed run counts on.
  const EvalSchedule schedule(options_.eval_every_steps, /*every_epochs=*/0, options_.epochs);
  int round = schedule.FirstRound(clock, /*epoch=*/0);
  // The batch of step `step` read and its parameters asked for, or null
  // past the data or the step budget.
  auto prepare = [&](int64_t step) -> absl::StatusOr<std::unique_ptr<Prepared>> {
    if (loop_.position().finished || (options_.max_steps > 0 && step >= options_.max_steps)) {
      return std::unique_ptr<Prepared>();
    }
    absl::Time t0 = absl::Now();
    auto b = reader->Next();
    result_.train.data_seconds += SecondsSince(t0);
    if (!b.ok()) return b.status();
    if (*b == nullptr) return std::unique_ptr<Prepared>();
    const int data_epoch = reader->last_epoch();
    PS_ASSIGN_OR_RETURN(auto p, Prepare(*std::move(b), step, true));
    p->data_epoch = data_epoch;
    return p;
  };
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Prepared> next, prepare(clock));
  while (next) {
    std::unique_ptr<Prepared> cur = std::move(next);
    if (prefetch) {
      PS_ASSIGN_OR_RETURN(next, prepare(clock + 1));
    }
    absl::Time t0 = absl::Now();
    PS_RETURN_IF_ERROR(BindParams(*cur, &params_));
    if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
    result_.train.wait_seconds += SecondsSince(t0);
    BindGrads(cur.get(), &grads_);
    StageStepInputs in;
    in.step = clock;
    in.batch = cur->batch;
    in.plan = &cur->plan;
    in.params = &params_;
    in.grads = &grads_;
    PS_ASSIGN_OR_RETURN(StageStepStats stats, runner_->TrainStep(in));
    last_push_ = PushGrads(cur.get(), static_cast<uint32_t>(stats.rows), clock);
    ++clock;
    PS_RETURN_IF_ERROR(TrainingLoop::CheckLoss(stats.loss_sum, clock));
    AfterStep(stats);
    PS_RETURN_IF_ERROR(CheckpointIfDue(clock, cur->data_epoch, cur->batch->size));
    if (!prefetch) {
      PS_ASSIGN_OR_RETURN(next, prepare(clock));
    }
    // The last step's round is the final evaluation's.
    if (const int due = schedule.RoundAtStep(clock);
        due >= 0 && !options_.eval_data.empty() && next != nullptr) {
      if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
      PS_RETURN_IF_ERROR(EvalRoundFirst(due, clock));
      round = due + 1;
    }
  }
  PS_RETURN_IF_ERROR(FinishTraining(clock));
  if (!options_.eval_data.empty()) PS_RETURN_IF_ERROR(EvalRoundFirst(round, clock));
  if (comm_ != nullptr) {
    PS_RETURN_IF_ERROR(SendMarker(proto::PipePhase::kEnd, clock));
    PS_RETURN_IF_ERROR(comm_->Flush());
  }
  return absl::OkStatus();
}

absl::Status PipelineTrainer::RunLaterStage() {
  PS_ASSIGN_OR_RETURN(int64_t clock, Resume(nullptr));
  const std::vector<uint32_t>& tables = runner_->dense_tables();
  PullHandle pending = kv_->Pull(tables, {}, clock);
  bool have_params = false;
  std::vector<Buffer> dense;
  auto ensure_params = [&]() -> absl::Status {
    if (have_params) return absl::OkStatus();
    absl::Time t0 = absl::Now();
    PS_ASSIGN_OR_RETURN(dense, pending.Wait());
    result_.train.wait_seconds += SecondsSince(t0);
    params_.tables.assign(tables_->size(), nullptr);
    for (size_t i = 0; i < tables.size(); ++i)
      params_.tables[tables[i]] = dense[i].as<float>().data();
    have_params = true;
    return absl::OkStatus();
  };
  while (true) {
    PS_ASSIGN_OR_RETURN(proto::PipeTransfer tag,
                        comm_->Peek(PipeDir::kPrev, absl::StrCat("the next message (step ", clock,
                                                                 " or a marker)")));
    switch (tag.phase) {
      case proto::PipePhase::kTrain: {
        PS_RETURN_IF_ERROR(ensure_params());
        absl::Time t0 = absl::Now();
        if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
        result_.train.wait_seconds += SecondsSince(t0);
        BindGrads(nullptr, &grads_);
        StageStepInputs in;
        in.step = clock;
        in.params = &params_;
        in.grads = &grads_;
        PS_ASSIGN_OR_RETURN(StageStepStats stats, runner_->TrainStep(in));
        last_push_ = PushGrads(nullptr, static_cast<uint32_t>(stats.rows), clock);
        ++clock;
        pending = kv_->Pull(tables, {}, clock);
        have_params = false;
        AfterStep(stats);
        PS_RETURN_IF_ERROR(CheckpointIfDue(clock, 0, 0));
        break;
      }
      case proto::PipePhase::kEval: {
        PS_RETURN_IF_ERROR(ensure_params());
        PS_ASSIGN_OR_RETURN(PipeReceived rec,
                            comm_->Receive(PipeDir::kPrev, "an evaluation batch"));
        PS_RETURN_IF_ERROR(runner_->EvalMicrobatch(rec, params_));
        break;
      }
      case proto::PipePhase::kEvalEnd:
        PS_RETURN_IF_ERROR(comm_->Receive(PipeDir::kPrev, "a marker").status());
        if (runner_->last()) {
          PS_RETURN_IF_ERROR(GatherEval(static_cast<int>(tag.step), clock));
        } else {
          PS_RETURN_IF_ERROR(SendMarker(proto::PipePhase::kEvalEnd, tag.step));
        }
        break;
      case proto::PipePhase::kTrainEnd:
        PS_RETURN_IF_ERROR(comm_->Receive(PipeDir::kPrev, "a marker").status());
        if (tag.step != clock) {
          return absl::InvalidArgumentError(absl::StrCat(
              comm_->SelfName(), " trained ", clock, " steps but ",
              comm_->NeighbourName(PipeDir::kPrev), " ended training after ", tag.step));
        }
        PS_RETURN_IF_ERROR(FinishTraining(clock));
        // The final evaluation sees every replica's last update.
        pending = kv_->Pull(tables, {}, clock);
        have_params = false;
        break;
      case proto::PipePhase::kEnd:
        PS_RETURN_IF_ERROR(comm_->Receive(PipeDir::kPrev, "a marker").status());
        if (!runner_->last()) PS_RETURN_IF_ERROR(SendMarker(proto::PipePhase::kEnd, tag.step));
        return comm_->Flush();
    }
  }
}

absl::Status PipelineTrainer::EvalRoundFirst(int round, int64_t clock) {
  PS_ASSIGN_OR_RETURN(
      auto reader, DataReader::Open(ShardReader(options_, options_.eval_data, place_.replica,
                                                pipeline_.replicas, options_.eval_batch_size, 1)));
  // The dense tables once per round; each batch's embedding rows.
  Prepared dense_only;
  dense_only.pull = kv_->Pull(runner_->dense_tables(), {}, clock);
  PS_ASSIGN_OR_RETURN(dense_only.dense, dense_only.pull.Wait());
  ParamRefs params;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> b, reader->Next());
    if (!b) break;
    PS_ASSIGN_OR_RETURN(auto p, Prepare(b, clock, /*with_dense=*/false));
    p->dense = dense_only.dense;
    PS_RETURN_IF_ERROR(BindParams(*p, &params));
    PS_RETURN_IF_ERROR(runner_->EvalBatch(round, b, p->plan, params));
  }
  if (runner_->last()) {
    PS_RETURN_IF_ERROR(GatherEval(round, clock));
  } else {
    PS_RETURN_IF_ERROR(SendMarker(proto::PipePhase::kEvalEnd, round));
  }
  return rank_ == 0 ? EndEvalRound(round, clock) : absl::OkStatus();
}

absl::Status PipelineTrainer::GatherEval(int round, int64_t clock) {
  std::vector<float> probs, labels;
  runner_->TakeScores(&probs, &labels);
  if (place_.tp != 0) return absl::OkStatus();  // the group's rank 0 reports
  spdlog::debug("replica {} scored {} evaluation rows at step {}", place_.replica, probs.size(), clock);
  return coordinator_->StoreSet(Key(absl::StrCat("eval/", round, "/", place_.replica)),
                                EncodeEvalBlob(probs, labels));
}

absl::Status PipelineTrainer::EndEvalRound(int round, int64_t clock) {
  std::vector<float> all_probs, all_labels;
  for (int r = 0; r < pipeline_.replicas; ++r) {
    PS_ASSIGN_OR_RETURN(
        Buffer b,
        WaitForKey(Key(absl::StrCat("eval/", round, "/", r)), options_.eval_part_timeout));
    PS_RETURN_IF_ERROR(AppendEvalBlob(b, absl::StrCat("replica ", r), &all_probs, &all_labels));
  }
  RecordEval(ComputeBinaryMetrics(all_probs, all_labels), clock, absl::StrCat("at step ", clock),
             SecondsSince(process_start_), metrics_.get(), &result_.train);
  return absl::OkStatus();
}

absl::Status PipelineTrainer::WriteSummary() {
  const int workers = pipeline_.stages * pipeline_.replicas * pipeline_.tensor_parallel;
  double mine[2] = {place_.stage == 0 && place_.tp == 0 ? static_cast<double>(result_.train.samples)
                                                        : 0.0,
                    result_.train.train_seconds};
  std::string blob(sizeof(mine), '\0');
  std::memcpy(blob.data(), mine, sizeof(mine));
  PS_RETURN_IF_ERROR(coordinator_->StoreSet(Key(absl::StrCat("stats/", rank_)),
                                            Buffer::FromString(std::move(blob))));
  if (rank_ != 0) return absl::OkStatus();
  double samples = 0, seconds = 0;
  for (int w = 0; w < workers; ++w) {
    PS_ASSIGN_OR_RETURN(
        Buffer b, WaitForKey(Key(absl::StrCat("stats/", w)), options_.stats_timeout));
    if (b.size() != 2 * sizeof(double)) return absl::DataLossError("malformed worker stats");
    double v[2];
    std::memcpy(v, b.data(), sizeof(v));
    samples += v[0];
    seconds = std::max(seconds, v[1]);
  }
  const double rate = seconds > 0 ? samples / seconds : 0;
  // A meta file that cannot be read gives no oracle.
  const double oracle = ReadOracleAuc(options_.eval_meta).value_or(NAN);
  const double wall = SecondsSince(process_start_);
  JsonLine line;
  line.Add("event", "summary")
      .Add("model", options_.model.name)
      .Add("mode", "pipeline")
      .Add("workers", workers)
      .Add("replicas", pipeline_.replicas)
      .Add("tensor_parallel", pipeline_.tensor_parallel);
  // The eval figures are the result's even without --eval_data (zeros, as
  // pipeline mode has always written them).
  AddSummaryFigures(result_.train, JobFigures{samples, rate, oracle, wall, /*evaluated=*/true},
                    &line);
  line.AddRaw("pipeline", stats_->Json());
  metrics_->Write(line);
  spdlog::info("pipeline: {}", stats_->LogLine());
  result_.samples_per_sec = rate;
  result_.oracle_auc = oracle;
  result_.wall_seconds = wall;
  return absl::OkStatus();
}

absl::StatusOr<PipelineStageResult> PipelineTrainer::Run() {
  PS_ASSIGN_OR_RETURN(metrics_, MetricsFile::Open(rank_ == 0 ? options_.metrics_out : ""));
  bsp_ = kv_->layout().consistency == proto::Consistency::kBsp;
  if (rank_ == 0) {
    stats_ = std::make_unique<PipelineStats>(pipeline_.stages, pipeline_.microbatches,
                                             pipeline_.schedule);
  }
  result_.replica = place_.replica;
  result_.stage = place_.stage;
  train_start_ = absl::Now();
  last_log_ = train_start_;
  PS_RETURN_IF_ERROR(runner_->first() ? RunFirstStage() : RunLaterStage());
  PS_RETURN_IF_ERROR(WriteSummary());
  result_.busy_seconds = runner_->busy_seconds();
  result_.wait_seconds = comm_ != nullptr ? comm_->wait_seconds() : 0;
  result_.bytes_sent = comm_ != nullptr ? comm_->bytes_sent() : 0;
  result_.max_live_microbatches = runner_->max_live_microbatches();
  if (stats_ != nullptr) {
    result_.bubble = stats_->bubble();
    result_.bubble_wall = stats_->bubble_wall();
    result_.reports = stats_->latest();
  }
  return result_;
}

}  // namespace pstrain::worker
