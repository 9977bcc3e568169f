// Trainer: the training loop of one worker in parameter-server mode.
//
// Each step: take the next batch from the reader, deduplicate its ids, pull
// the dense tables and the batch's sparse rows, run forward/backward, push
// the gradients. Under ASP and SSP the pull of the next batch is issued
// before the current batch computes (prefetch: parameters one step stale,
// which those models allow); under BSP it waits for the step to close.
// Evaluations (every N steps and at the end) score this worker's share of
// the eval data and gather the scores at the lead worker, which computes
// exact metrics over all rows, writes --metrics_out and the summary and
// saves the model. The lead is worker 0; with elastic workers, once worker
// 0 is dropped, the lowest-ranked live worker (coordinator store key
// "lead"; worker/trainer_lead.cc). With --keep_best or --early_stop_rounds
// the lead also judges each round, keeps the best one's model and tells
// every worker whether to go on (worker/trainer_best.cc). A failure of the
// final evaluation does not lose the trained model: the lead saves it and
// then reports the failure. Where a run starts (a restored checkpoint's
// position), where the worker stands and the pause at each checkpoint are
// the TrainingLoop's (worker/training_loop.h), and an evaluation's figures
// and the summary's are written as worker/run_report.h says: both shared
// with the PipelineTrainer.
//
// Not thread-safe: one thread runs Run().
#pragma once

#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_client.h"
#include "data/eval/progressive.h"
#include "data/reader.h"
#include "data/schema.h"
#include "model/models/model.h"
#include "serve/model_io.h"
#include "worker/allreduce/dense_replica.h"
#include "worker/eval/best_round.h"
#include "worker/eval/eval_schedule.h"
#include "model/models/head_eval.h"
#include "worker/kv_client.h"
#include "worker/progress.h"
#include "worker/training_loop.h"

namespace pstrain::worker {

class TrainMetrics;  // worker/train_metrics.h

class DataReader;

// A stream partition closed on this worker (its index and name).
struct PendingPartition {
  int epoch = 0;
  std::string name;
};

struct TrainOptions {
  ModelOptions model;
  Schema schema;
  std::vector<std::string> train_data;  // paths or globs
  // --train_stream: partitions instead of train_data (data/partition_stream.h).
  StreamOptions train_stream;
  std::vector<std::string> eval_data;
  int batch_size = 1024;
  int epochs = 1;
  int64_t max_steps = 0;        // 0: no step budget
  size_t shuffle_buffer = 0;    // rows
  int reader_threads = 1;       // decoding threads of the readers (ReaderOptions)
  uint64_t seed = 1;
  double max_bad_lines_fraction = 0.01;
  int64_t eval_every_steps = 0;  // 0: only at the end
  int eval_every_epochs = 0;     // rounds at epoch ends instead (worker/eval/eval_schedule.h)
  std::string lr_scaling = "none";  // none | linear (by the number of workers)
  int32_t warmup_steps = 0;         // linear learning-rate warm-up
  int64_t lr_decay_start = 0;       // linear decay to lr_decay_end x lr over
  int64_t lr_decay_steps = 0;       // lr_decay_steps steps from lr_decay_start
  float lr_decay_end = 0.0f;
  AdmissionConfig admission;        // for every sparse table (--min_count, ...)
  EvictionConfig eviction;          // for every sparse table (--max_rows, ...)
  RowDtype embedding_dtype = RowDtype::kFloat32;  // for every sparse table
  bool zero_untrained = false;  // TableSpec::zero_untrained of every sparse table
  int eval_batch_size = 4096;
  // ASP and BSP: each step's push travels with the next pull, one message
  // to each server (KvClient::PushPull); false: a message each, as SSP and
  // allreduce mode always send them.
  bool push_with_pull = true;
  // Progress lines and metrics: often enough to follow a run, rare enough
  // to keep --metrics_out small.
  absl::Duration log_every = absl::Seconds(5);
  std::string metrics_out;       // JSON lines (the lead worker writes)
  std::string eval_meta;         // generator's meta JSON (oracle AUC), optional
  std::string save_model;        // export the trained model here (the lead)
  // --keep_best: save_model holds the model of the evaluation round that
  // scored best by this metric, exported at each round that improves on the
  // best so far (unset: the last model, saved at the end).
  std::optional<EvalMetric> keep_best;
  // The head of a model of several heads whose metric keep_best and early
  // stopping follow ("HEAD.eval_auc"; "": the first head's).
  std::string keep_best_head;
  // The lead also exports the model to save_model every this many steps
  // (0: only at the end). REQUIRES: save_model, no keep_best.
  int64_t export_every_steps = 0;
  // ... and after the first step that ends this long after its last export
  // (zero: not by time). REQUIRES: as export_every_steps.
  absl::Duration export_every = absl::ZeroDuration();
  // --export_dir: the periodic exports (and one at the end) go here as
  // versions, bases and deltas (serve/model_versions.h), not to save_model.
  std::string export_dir;
  int export_base_every = 10;  // deltas between two bases
  int export_keep_bases = 2;   // bases kept (with their deltas); older pruned
  // Training stops, on every worker after the same step, once the metric
  // (keep_best's, else the AUC) has not improved for this many evaluations
  // in a row (0: never). REQUIRES: eval_every_steps > 0 and eval_data.
  int early_stop_rounds = 0;
  bool progress_bar = false;     // redraw a bar on stderr (a terminal)
  TrainMetrics* train_metrics = nullptr;  // live numbers for /metrics and heartbeats (optional)
  // --train_stream: the partitions passed here whose merged line the lead
  // has not written yet; kept by the caller across a rollback's attempts
  // (optional: else each attempt keeps its own).
  std::vector<PendingPartition>* pending_partitions = nullptr;
  // The cluster epoch a server failure rolls back to (set when the
  // coordinator says so; optional): a worker waiting for the lead's summary
  // leaves the wait to take part in the rollback.
  const std::atomic<uint64_t>* recover_epoch = nullptr;
  // A re-admitted worker: samples its rank trained in the process that was
  // dropped, counted in the job's summary.
  uint64_t samples_before = 0;
  // A worker re-admitted after it was dropped (elastic): it says at which
  // step it resumes ("resumed/<rank>"), so that the lead scores its share of
  // a round it was dropped across instead of waiting for its part.
  bool readmitted = false;
  // Waits on the other workers (both trainers). The longest a worker done
  // training waits for the slowest one: finishing times differ by what an
  // adopter trains of a dead worker's shard; a day bounds any job we run.
  absl::Duration finish_timeout = absl::Hours(24);
  // The longest the lead waits for a worker's (pipeline: a replica's) part
  // of an evaluation round: one pass over its eval shard, minutes on large
  // eval data.
  absl::Duration eval_part_timeout = absl::Hours(1);
  // The longest the lead waits for a worker's statistics for the summary:
  // each stores them right after its final evaluation part, so this is slack.
  absl::Duration stats_timeout = absl::Minutes(10);
  // With keep_best or early stopping, the longest a worker waits at an
  // evaluation round for the lead's verdict (stop or go on): the lead
  // gathers every part (each within eval_part_timeout) and may export the
  // model first.
  absl::Duration verdict_timeout = absl::Hours(2);
};

// What a finished run measured (on this worker).
struct TrainResult {
  int64_t steps = 0;
  int64_t samples = 0;
  double train_seconds = 0;
  double compute_seconds = 0;
  double wait_seconds = 0;
  double data_seconds = 0;
  double allreduce_wait_seconds = 0;  // allreduce mode: waiting for buckets after compute
  double checkpoint_seconds = 0;      // paused for checkpoints
  double reader_rows_per_sec = 0;
  double final_loss = 0;
  bool early_stopped = false;  // --early_stop_rounds ended training
  // Set on the lead worker after the final evaluation.
  double eval_auc = 0;
  double eval_logloss = 0;
  double eval_accuracy = 0;
  double eval_ne = 0;           // normalized entropy: logloss over the base rate's entropy
  double eval_calibration = 0;  // mean prediction over the observed positive rate
  int64_t eval_rows = 0;
  // A model of several heads: each head's (the fields above are the first's).
  std::vector<HeadEval> eval_heads;
};

// A dead worker's shard trained by this one (elastic workers).
struct AdoptedShard {
  int rank = -1;
  int64_t skipped_rows = 0;  // what it had trained
  int64_t trained_rows = 0;  // trained here
  uint64_t its_samples = 0;  // samples it had trained in all
};

// --lr_scaling and --warmup_steps applied to the tables a job defines:
// linear scaling multiplies every learning rate by `num_workers`; the
// warm-up is carried in each table's optimizer config. The admission and
// eviction options go to every sparse table (per-table: not yet).
void ApplyLrSchedule(const TrainOptions& options, int num_workers, std::vector<TableSpec>* tables);

class Trainer {
 public:
  // `replica` (allreduce mode, may be null) holds the dense tables that live
  // on the workers; every other table is on the servers.
  Trainer(TrainOptions options, Model* model, KvClient* kv, CoordinatorClient* coordinator,
          int rank, int num_workers, DenseReplica* replica = nullptr);
  ~Trainer();

  // Trains, evaluates and (on the lead worker) writes the summary.
  // REQUIRES: called once.
  absl::StatusOr<TrainResult> Run();

 private:
  // A step's batch, planned, with its pull (trainer_exchange.cc).
  struct Prepared {
    std::shared_ptr<const Batch> batch;
    int64_t clock = 0;  // the step it is planned for
    int epoch = 0;      // data epoch the batch came from
    BatchPlan plan;
    std::vector<Buffer> rows;  // per sparse table: unique x dim, as received
    PullHandle pull;
    std::vector<Buffer> dense;  // pulled dense tables, by position in dense_tables_
  };

  // The steps of Run(), in order. OpenReader: this worker's shard of the
  // training data. StartAt: the first step (a restored job's position, its
  // data skipped up to there) and its batch prepared.
  absl::Status OpenReader();
  absl::Status StartAt();
  // The batch of step `step` read and prepared (its pull issued), or null
  // past the step budget or the data. The only place batches are read.
  // With `none_ready`: only a batch ready now; else null and *none_ready.
  // Without `issue`, the pull is not sent yet (IssuePull).
  absl::StatusOr<std::unique_ptr<Prepared>> NextPrepared(int64_t step,
                                                         bool* none_ready = nullptr,
                                                         bool issue = true);
  // Sends p's pull; with a held push (held_push_), both in one message to
  // each server.
  void IssuePull(Prepared& p);
  // Trains next_: binds its parameters, computes, pushes, accounts, reports
  // and evaluates when due; next_ then holds the following step's batch.
  absl::Status RunStep();
  // The step's gradient buffers (fresh for the tables on the servers: they
  // travel with the push; the replica's own for the tables it holds), bound
  // in grads_.
  std::vector<Buffer> BindGrads(const Prepared& p);
  // Sends the step's gradients to the servers (last_push_) and, allreduce
  // mode, finishes the dense replica's buckets meanwhile.
  absl::Status PushGrads(const Prepared& p, const std::vector<Buffer>& grad_buffers,
                         const StepOutput& out);
  // After a step: the clock, this worker's position, a checkpoint due, the
  // loss (an error when it is not finite).
  absl::Status AccountStep(const Prepared& p, const StepOutput& out);
  // Progress (the lead), the live metrics.
  absl::Status ReportStep(const StepOutput& out);
  // Out of batches: the last push on the servers, this worker retired and
  // reported finished, the result's training figures.
  absl::Status FinishTraining();
  // Out of batches: the last push on the servers, this worker retired from
  // them (BSP and SSP stop counting it) and "trained/<rank>" stored (the
  // lead scores its evaluation share from now on). Once.
  absl::Status RetireFromServers();
  // Allreduce mode, out of batches: joins the others' steps with no
  // samples until every worker is out (DenseReplica::FinishIdle); a lead
  // gathers the rounds the others reach meanwhile.
  absl::Status JoinIdleSteps();
  // Out of batches: waits at the "trained" barrier for the others, saying
  // whom it waits for; the lead gathers the rounds they reach meanwhile.
  absl::Status WaitForOthersToTrain();
  // Waits for the last push to be on the servers (a held one sent first).
  absl::Status WaitForLastPush();

  // The batch planned for step `clock`, its pull sent with `issue`.
  absl::StatusOr<std::unique_ptr<Prepared>> Prepare(std::shared_ptr<const Batch> batch,
                                                    int64_t clock, bool issue = true);
  absl::Status Bind(Prepared& p, ParamRefs* params);
  // Evaluates eval shard `shard` (this worker's, or an adopted one's) and
  // hands the predictions to the lead, which computes the metrics.
  // A failure to score the final round's shard is handed to the lead as
  // the shard's part (so it does not wait for it) and kept in eval_error_.
  absl::Status Evaluate(int round, int64_t clock, TrainResult* result, bool final_round,
                        int shard);
  // After step clock_ (from 0-based epoch `epoch`; next_ holds the next
  // step's batch or null): this worker's part of a round that falls here,
  // and (epoch rounds) the lead's look at complete rounds or another
  // worker's at the lead's verdict (worker/trainer_rounds.cc).
  absl::Status EvaluateIfDue(int epoch);
  // Epoch rounds: the lead gathers the rounds whose parts are all in, the
  // others look for its latest verdict; at most once a second unless `now`.
  absl::Status LookAtEpochRounds(bool now);
  // Whether round `round` can be gathered now: someone reached it and every
  // worker's part is in or will never come (out of data, dead).
  absl::StatusOr<bool> RoundReady(int round);
  // The lead: gathers (and judges) the rounds from next_collect_ up to
  // `limit` (exclusive) while they are ready.
  absl::Status GatherReadyRounds(int limit);
  // The lead out of data: gathers every round the others reached.
  absl::Status GatherRoundsOfOthers();
  // The lead out of data (ps mode): gathers each round as soon as another
  // worker reaches it, until no worker is still training.
  absl::Status ServeRoundsOfOthers();
  // After every worker trained: the most steps any worker took.
  absl::StatusOr<int64_t> JobSteps();
  // The workers that are neither out of data nor dead.
  absl::StatusOr<std::vector<int>> StillTraining();
  // The step a round's model is at, for its metrics: a step round's own
  // step; an epoch round's, the latest step a worker reached it at.
  absl::StatusOr<int64_t> RoundClock(int round);
  // The epoch of next_'s batch; -1 without one.
  int NextEpoch() const;
  absl::Status Score(int shard, int64_t clock, std::vector<float>* probs, std::vector<float>* labels);
  // The final evaluation of every shard this worker holds: the first error.
  absl::Status FinalEvaluation();
  // Stores shard `shard`'s part of round `round`; this worker's own shard:
  // the lead gathers the round, another worker (keep_best, early stop)
  // waits for the lead's verdict on it, taking the lead over if it must.
  absl::Status Gather(int round, const Buffer& part, TrainResult* result, int64_t clock,
                      bool final_round, int shard);
  // The lead: what worker `w` stored under key+w, or nothing when `w` died
  // (elastic) and nobody adopted it (or, mid-training, at all).
  // `score_here` (periodic rounds): set, with no part, when w ran out of
  // data before the round, so that the lead scores its share itself (null:
  // no part then).
  // `clock`: the round's step, for the log while waiting.
  absl::StatusOr<std::optional<Buffer>> FromWorker(const std::string& key, int w, bool final_round,
                                                   absl::Duration timeout, int64_t clock,
                                                   bool* score_here = nullptr);
  // The lead (trainer_lead.cc). LearnLead reads who it is when Run starts
  // (and whether the job is elastic: the coordinator publishes "lead" only
  // then). IsLead: whether this worker is the lead, asking the coordinator
  // again (elastic: the role moves when the lead is dropped) when `now` or
  // every 2 s; a worker that becomes the lead opens --metrics_out.
  absl::Status LearnLead();
  absl::StatusOr<bool> IsLead(bool now);
  // The lead: gathers every worker's part of evaluation round `round` and
  // writes its metrics.
  absl::Status Collect(int round, int64_t clock, bool final_round, TrainResult* result,
                       absl::Duration timeout);
  // A new lead: gathers the rounds before `round` that the dead lead had
  // not written (in flight when it died), without its part.
  absl::Status CatchUpRounds(int round, TrainResult* result);
  // After the final evaluation: stores this worker's statistics; the lead
  // saves the model and writes the summary, the others (elastic) wait for
  // it, ready to take the lead over if it dies meanwhile.
  // `eval_status`: how this worker's final evaluation went; an error is
  // returned after the lead saved the model (the others wait for it).
  absl::Status FinishRun(int64_t clock, int final_round, absl::Status eval_status,
                         TrainResult* result);
  // The lead, at the end: the model saved (or, keep_best, kept) and the
  // summary written; the run's error (eval_status, or no rows trained).
  absl::Status FinishAsLead(int64_t clock, int final_round, absl::Status eval_status,
                            TrainResult* result);
  absl::Status StoreStats(const TrainResult& result);
  // The lead: every worker's statistics summed, samples and seconds.
  struct Totals {
    double samples = 0;      // trained in all, before a resume or re-admission too
    double seconds = 0;      // the longest worker's training time in this run
    double run_samples = 0;  // trained in this run (the rate)
  };
  absl::StatusOr<Totals> JobTotals();
  // Returns the summary line (JSON).
  absl::StatusOr<std::string> WriteSummary(const TrainResult& result, const Totals& totals);
  // Elastic: claims a dead worker's remaining shard and opens reader_ on
  // it, positioned after the rows it had trained. False: none left.
  absl::StatusOr<bool> AdoptShard();
  // Exports the model at `step` to save_model (whole, in one step);
  // `chosen`: the round keep_best chose it by (null: none).
  absl::Status SaveModel(int64_t step, const EvalRound* chosen = nullptr);
  // --export_dir: writes the next version at `step`, a delta of the rows
  // changed since the last version, or a base (worker/trainer_export.cc).
  absl::Status ExportVersion(int64_t step);
  // The model's tables at `step` into `saved`: dense tables pulled (or the
  // replica's), sparse tables dumped (`dump`: kAll, or a versioned export's
  // request); `*rows` counts the sparse rows.
  absl::Status CollectTables(int64_t step, const proto::DumpRequest& dump, SavedModel* saved,
                             uint64_t* rows);
  // A periodic export (to export_dir, else save_model).
  absl::Status ExportNow(int64_t step) {
    periodic_step_ = step;
    return options_.export_dir.empty() ? SaveModel(step) : ExportVersion(step);
  }
  // The reader's next batch. While a stream waits for its next partition
  // the lead still exports (trainer_stream.cc): every --export_every_secs
  // (1 s with only --export_every_steps) once it trained steps since its
  // last export, so that serving gets the rows trained before the wait.
  absl::StatusOr<std::shared_ptr<const Batch>> NextBatch();
  // --keep_best and --early_stop_rounds (worker/trainer_best.cc).
  // Whether the workers wait at each round for the lead's verdict.
  bool JudgesRounds() const { return best_.has_value(); }
  // The lead, once it gathered round `round` (at `clock`: the model it has
  // now): the best round updated and stored, the model exported when it
  // improved, and for a periodic round the verdict stored for the others.
  absl::Status JudgeRound(int round, int64_t clock, bool final_round, const TrainResult& result);
  // Another worker: one look (about a second) for the lead's verdict on
  // round `round`; true once there is one (stop_ set when it says stop).
  absl::StatusOr<bool> LookForVerdict(int round, int64_t clock);
  // The lead: the best round an earlier lead or attempt stored, if any.
  absl::Status LoadBest();
  std::string VerdictKey(int round) const;
  std::string LastVerdictKey() const;  // the lead's latest verdict
  // Restored job: this worker's position from the layout (loop_), its
  // data skipped up to there, worker-held state loaded.
  absl::Status ResumePosition();
  // Pauses for the checkpoint due at clock_ (loop_), with the dense
  // replica's state (allreduce mode, worker 0).
  absl::Status Checkpoint();
  // How far the run is, 0..1, for the ETA (NaN: unknown).
  double FractionDone(int64_t step, const ReaderStats& reader) const;
  // --train_stream (worker/trainer_stream.cc). ScoreRows: the step's
  // progressive scores. ClosePartitions: this worker's parts of the
  // partitions from position_'s up to `end_epoch` (exclusive) stored.
  // CollectPartitions: the lead writes the partitions whose parts are all
  // in (`final`: waits for them). FinishPartitions: out of data, the rest
  // closed.
  bool streaming() const { return !options_.train_stream.dir.empty(); }
  std::string PartitionKey(int epoch) const;
  // Adds partition `epoch` to the lead's pending ones (kept in index order), once.
  void AddPending(int epoch, std::string name);
  void ScoreRows(const Batch& batch, const StepOutput& out);
  absl::Status ClosePartitions(int end_epoch);
  absl::Status CollectPartitions(bool final);
  absl::Status FinishPartitions();
  // A resumed lead: the partitions before its position whose lines were
  // not written (its predecessor died before it could) become pending.
  absl::Status PickUpUnwrittenPartitions();

  TrainOptions options_;
  Model* model_;
  KvClient* kv_;
  CoordinatorClient* coordinator_;
  int rank_;
  int num_workers_;
  DenseReplica* replica_;
  std::vector<uint32_t> dense_tables_;  // dense tables pulled from the servers
  uint64_t shard_bytes_ = 0;
  std::vector<AdoptedShard> adopted_;
  std::unique_ptr<MetricsFile> metrics_;
  bool elastic_ = false;     // the coordinator publishes the lead
  int lead_ = 0;
  absl::Time lead_checked_ = absl::InfinitePast();
  int first_round_ = 0;          // the first evaluation round this worker took part in
  bool final_collected_ = false;  // this worker gathered the final evaluation
  absl::Status eval_error_;  // this worker could not score its part of the final round
  // keep_best / early stop: the lead's judge of the rounds; set on every
  // worker (only the lead feeds it).
  std::optional<BestRound> best_;
  bool best_exported_ = false;  // save_model holds best_'s round's model
  bool stop_ = false;           // early stop: training ends after this step
  absl::Time process_start_;

  // Run()'s state.
  ReaderOptions reader_options_;        // this worker's shard (start: the restored position)
  std::unique_ptr<DataReader> reader_;  // the shard being trained (an adopted one's at the end)
  bool prefetch_ = false;  // ASP/SSP: a step's pull is issued before the step before computes
  bool hold_pushes_ = false;  // TrainOptions::push_with_pull where it applies (ASP, BSP)
  std::unique_ptr<Progress> progress_;
  TrainResult result_;
  int64_t clock_ = 0;  // steps trained
  double loss_sum_ = 0, total_loss_ = 0;  // since the last progress report, before it
  int64_t loss_count_ = 0, total_count_ = 0;
  EvalSchedule schedule_;
  int eval_round_ = 0;     // the next round this worker scores its own part of
  int next_collect_ = 0;   // the lead: the next round it gathers
  int64_t job_steps_ = 0;  // after training: the most steps any worker took
  double last_eval_auc_ = NAN;   // the lead's latest evaluation, for progress lines
  int64_t last_eval_step_ = -1;
  bool retired_ = false;   // RetireFromServers done
  absl::Time rounds_looked_ = absl::InfinitePast();  // epoch rounds: the last look
  absl::Time train_start_;
  // Where this worker stands in its data (loop_.position(): the epoch of
  // the last batch trained and the rows of that epoch trained so far), the
  // checkpoints.
  TrainingLoop loop_;
  int64_t resumed_samples_ = 0;    // trained before the checkpoint this run resumed from
  absl::Time last_export_;         // --export_every_secs: the lead's last export (or the start)
  // --export_dir: the newest version there and its base (0: none), read
  // from the folder at the first export.
  bool export_dir_read_ = false;
  uint64_t export_latest_ = 0;
  uint64_t export_base_ = 0;
  int64_t export_step_ = -1;    // the step of this lead's last version
  int64_t periodic_step_ = -1;  // the step of this lead's last periodic export
  // The next step's batch, its pull issued (BSP: read ahead, its pull
  // issued once this step's push is ready to go with it); null: none.
  std::unique_ptr<Prepared> next_;
  PushHandle last_push_;
  // A step's push not sent yet: it leaves with the next pull (IssuePull),
  // or alone when something must wait for it (WaitForLastPush). Its ids
  // point into `keep`'s plan.
  struct HeldPush {
    std::vector<DensePush> dense;
    std::vector<SparsePush> sparse;
    uint32_t samples = 0;
    int64_t clock = 0;
    std::shared_ptr<const Prepared> keep;
  };
  std::optional<HeldPush> held_push_;
  ParamRefs params_;
  GradRefs grads_;
  OptimizerConfig warmup_;  // the lr schedule of the dense replica's steps (allreduce mode)
  PartitionScore score_;    // --train_stream: of position_.epoch's rows scored here
  // A model of several heads: each head's (by head; the first's is score_,
  // a regression head's stays empty).
  std::vector<PartitionScore> head_score_;
  // A partition's scores of one head, merged from the workers' parts.
  struct HeadPartition {
    std::string name;
    PartitionScore score;
  };
  // The lead: each classifying head's (but the first's) parts of partition
  // `epoch` from `workers`, merged.
  absl::StatusOr<std::vector<HeadPartition>> MergeHeadParts(int epoch, const std::vector<int>& workers);
  std::vector<PendingPartition> own_pending_;
  std::vector<PendingPartition>* pending_partitions_;  // options_' or own_pending_
  absl::Time partitions_looked_ = absl::InfinitePast();  // the lead's last look for their parts
};

}  // namespace pstrain::worker
