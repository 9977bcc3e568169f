// The Trainer's evaluation rounds. worker/eval/eval_schedule.h says where
// they fall; every worker scores its own share of --eval_data (shard
// `rank` of `num_workers`) and stores the predictions under
// "eval/<round>/<rank>"; the lead gathers a round, computes exact metrics
// over all its rows and writes them (worker/trainer_lead.cc says who the
// lead is).
//
// Workers hold different numbers of batches (their byte ranges hold
// different rows; a compressed file goes whole to one worker, leaving
// another none), so they reach rounds at different steps, or never:
//   - a worker out of data says so ("trained/<rank>", after storing its
//     last part); in every later round the lead scores that worker's share
//     itself (its model is on the servers, or in allreduce mode every
//     replica's dense tables are equal), so each round covers all eval rows;
//   - a step round is gathered when the lead reaches it; a lead out of data
//     gathers the rounds the others reach ("reached/<round>") while it waits
//     for them to finish training (and in allreduce mode, at the steps it
//     joins without data);
//   - epoch rounds fall at each worker's own epoch ends, so under BSP, SSP
//     and allreduce no worker may wait at one for another: parts are stored
//     without waiting, the lead gathers a round once every part is in (a look
//     a second at most), and its verdicts (--keep_best, --early_stop_rounds)
//     reach the others the same way ("verdict/<epoch>/last").
// A wait for a part or a verdict says in the log whom it waits for after
// 5 s, then at doubling intervals.
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/eval/metrics.h"
#include "data/reader.h"
#include "worker/eval/eval_blob.h"
#include "worker/run_report.h"
#include "worker/train_metrics.h"
#include "worker/trainer.h"
#include "worker/trainer_store.h"
#include "worker/wait_log.h"

namespace pstrain::worker {
namespace {

using trainer_store::Missing;
constexpr absl::Duration kStorePollSlice = trainer_store::kPollSlice;
// A live worker stores its part of a round as soon as it has scored it; a
// part still missing after this belongs to a worker that is gone.
constexpr absl::Duration kCatchUpTimeout = absl::Seconds(30);

// How long a lead out of data waits for the next round before it looks
// again at who is still training.
constexpr absl::Duration kServeLookSlice = absl::Milliseconds(250);

// Where the parts of an evaluation round are stored. The final round has a
// key of its own: a worker that trained an adopted shard took more steps
// (and counted more rounds) than the others.
std::string EvalKey(int round, bool final_round) {
  return final_round ? std::string("eval/final/") : absl::StrCat("eval/", round, "/");
}
std::string ReachedKey(int round) { return absl::StrCat("reached/", round); }
std::string TrainedKey(int rank) { return absl::StrCat("trained/", rank); }

}  // namespace

absl::StatusOr<int64_t> Trainer::RoundClock(int round) {
  if (!schedule_.by_epochs()) return (static_cast<int64_t>(round) + 1) * options_.eval_every_steps;
  // Each worker ends an epoch at a step of its own: the round is as late as
  // the last worker that reached it.
  auto reached = coordinator_->StoreGet(ReachedKey(round), absl::ZeroDuration());
  int64_t step = 0;
  if (reached.ok() && absl::SimpleAtoi(std::string(reinterpret_cast<const char*>(reached->data()),
                                                   reached->size()),
                                       &step)) {
    return step;
  }
  return clock_;
}

absl::Status Trainer::EvaluateIfDue(int epoch) {
  if (options_.eval_data.empty() || !schedule_.enabled()) return absl::OkStatus();
  if (!schedule_.by_epochs()) {
    const int round = schedule_.RoundAtStep(clock_);
    if (round < 0) return absl::OkStatus();
    PS_RETURN_IF_ERROR(WaitForLastPush());
    eval_round_ = round + 1;
    return Evaluate(round, clock_, &result_, /*final_round=*/false, rank_);
  }
  // An epoch ends where the next batch comes from the next epoch, or where
  // the data ends (not a step budget or an early stop).
  const bool out_of_budget = options_.max_steps > 0 && clock_ >= options_.max_steps;
  const bool ended = !stop_ && adopted_.empty() &&
                     (NextEpoch() >= 0 ? NextEpoch() != epoch : !out_of_budget);
  const int round = ended ? schedule_.RoundAtEpochEnd(epoch) : -1;
  if (round >= 0) {
    PS_RETURN_IF_ERROR(WaitForLastPush());
    eval_round_ = round + 1;
    PS_RETURN_IF_ERROR(Evaluate(round, clock_, &result_, /*final_round=*/false, rank_));
  }
  return LookAtEpochRounds(/*now=*/round >= 0);
}

absl::Status Trainer::LookAtEpochRounds(bool now) {
  if (!now && absl::Now() - rounds_looked_ < kStorePollSlice) return absl::OkStatus();
  rounds_looked_ = absl::Now();
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
  if (lead) return GatherReadyRounds(/*limit=*/eval_round_);
  if (!JudgesRounds() || stop_) return absl::OkStatus();
  auto verdict = coordinator_->StoreGet(LastVerdictKey(), absl::ZeroDuration());
  if (!verdict.ok()) {
    if (Missing(verdict.status())) return absl::OkStatus();
    return Annotate(verdict.status(), "looking for the lead worker's verdict");
  }
  if (verdict->size() == 4 && std::memcmp(verdict->data(), "stop", 4) == 0) {
    stop_ = true;
    spdlog::info("early stop at step {}: the lead worker's verdict (the evaluation has not "
                 "improved for {} rounds)",
                 clock_, options_.early_stop_rounds);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Trainer::RoundReady(int round) {
  auto reached = coordinator_->StoreGet(ReachedKey(round), absl::ZeroDuration());
  if (!reached.ok()) {
    if (Missing(reached.status())) return false;  // nobody has reached it
    return Annotate(reached.status(), "looking at an evaluation round");
  }
  const std::string key = EvalKey(round, /*final_round=*/false);
  // Worker w's part is in, or will never come (out of data, or dead).
  auto settled = [&](int w) -> absl::StatusOr<bool> {
    for (const std::string& k : {key + std::to_string(w), TrainedKey(w), absl::StrCat("dead/", w)}) {
      auto b = coordinator_->StoreGet(k, absl::ZeroDuration());
      if (b.ok()) return true;
      if (!Missing(b.status())) return Annotate(b.status(), absl::StrCat("looking at store key ", k));
    }
    return false;
  };
  for (int w = 0; w < num_workers_; ++w) {
    PS_ASSIGN_OR_RETURN(bool in, settled(w));
    if (!in) return false;
  }
  return true;
}

absl::Status Trainer::GatherReadyRounds(int limit) {
  while (next_collect_ < limit) {
    PS_ASSIGN_OR_RETURN(bool ready, RoundReady(next_collect_));
    if (!ready) return absl::OkStatus();
    const int round = next_collect_;
    PS_ASSIGN_OR_RETURN(const int64_t clock, RoundClock(round));
    PS_RETURN_IF_ERROR(Collect(round, clock, /*final_round=*/false, &result_, options_.eval_part_timeout));
    PS_RETURN_IF_ERROR(JudgeRound(round, clock, /*final_round=*/false, result_));
  }
  return absl::OkStatus();
}

absl::Status Trainer::GatherRoundsOfOthers() {
  if (options_.eval_data.empty() || !schedule_.enabled()) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
  if (!lead) return absl::OkStatus();
  // Rounds are reached in order; the first one nobody reached ends the look.
  return GatherReadyRounds(std::numeric_limits<int>::max());
}

absl::Status Trainer::WaitForOthersToTrain() {
  PS_RETURN_IF_ERROR(ServeRoundsOfOthers());
  const std::string what =
      absl::StrCat("the other workers to finish training (this one ended at step ", clock_, ")");
  PS_RETURN_IF_ERROR(coordinator_->WaitAtBarrier("trained", num_workers_, options_.finish_timeout, what,
                                                 [this] { return GatherRoundsOfOthers(); }));
  // Every part is stored before its worker arrives: the rounds left are all in.
  return GatherRoundsOfOthers();
}

absl::StatusOr<std::vector<int>> Trainer::StillTraining() {
  std::vector<int> training;
  for (int w = 0; w < num_workers_; ++w) {
    bool out = false;
    for (const std::string& k : {TrainedKey(w), absl::StrCat("dead/", w)}) {
      auto b = coordinator_->StoreGet(k, absl::ZeroDuration());
      if (!b.ok() && !Missing(b.status())) return Annotate(b.status(), absl::StrCat("looking at store key ", k));
      out = out || b.ok();
    }
    if (!out) training.push_back(w);
  }
  return training;
}

absl::StatusOr<int64_t> Trainer::JobSteps() {
  int64_t steps = clock_;
  for (int w = 0; w < num_workers_; ++w) {
    auto b = coordinator_->StoreGet(TrainedKey(w), absl::ZeroDuration());
    if (!b.ok()) {
      if (Missing(b.status())) continue;  // dead (elastic)
      return Annotate(b.status(), "reading the workers' last steps");
    }
    int64_t theirs = 0;
    if (absl::SimpleAtoi(std::string(reinterpret_cast<const char*>(b->data()), b->size()), &theirs)) {
      steps = std::max(steps, theirs);
    }
  }
  return steps;
}

absl::Status Trainer::ServeRoundsOfOthers() {
  if (options_.eval_data.empty() || !schedule_.enabled()) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
  if (!lead) return absl::OkStatus();
  WaitLog log;
  while (true) {
    // A round is gathered as soon as its parts are in (the workers of
    // --keep_best wait for its verdict).
    PS_ASSIGN_OR_RETURN(bool ready, RoundReady(next_collect_));
    if (ready) {
      const int round = next_collect_;
      PS_ASSIGN_OR_RETURN(const int64_t clock, RoundClock(round));
      PS_RETURN_IF_ERROR(Collect(round, clock, /*final_round=*/false, &result_, options_.eval_part_timeout));
      PS_RETURN_IF_ERROR(JudgeRound(round, clock, /*final_round=*/false, result_));
      continue;
    }
    PS_ASSIGN_OR_RETURN(std::vector<int> training, StillTraining());
    if (training.empty()) {
      // Their last parts are stored before they say they are out of data.
      return GatherRoundsOfOthers();
    }
    if (log.Due()) {
      spdlog::info("training ended here at step {}; waiting for worker(s) {} to finish training ({:.0f} s "
                   "so far) and gathering the evaluation rounds they reach",
                   clock_, absl::StrJoin(training, ", "), log.seconds());
    }
    // Woken by the part of the round it waits for; the end of the others'
    // training is seen within a quarter of a second.
    auto part = coordinator_->StoreGet(
        EvalKey(next_collect_, /*final_round=*/false) + std::to_string(training.front()), kServeLookSlice);
    if (!part.ok() && !Missing(part.status())) {
      return Annotate(part.status(), "waiting for an evaluation part");
    }
  }
}

absl::Status Trainer::JoinIdleSteps() {
  if (replica_ == nullptr) return absl::OkStatus();
  PS_RETURN_IF_ERROR(RetireFromServers());
  bool logged = false;
  while (true) {
    PS_RETURN_IF_ERROR(Annotate(replica_->FinishIdle(LrScheduleScale(warmup_, clock_)).status(),
                                absl::StrCat("allreduce of step ", clock_, " (out of data)")));
    const int training = replica_->last_workers_with_data();
    if (training == 0) break;
    if (!logged) {
      spdlog::info("out of data at step {}: joining the steps of the {} worker(s) still training "
                   "with no samples until they are out too",
                   clock_, training);
      logged = true;
    }
    ++clock_;
    if (loop_.Reached(clock_)) PS_RETURN_IF_ERROR(Checkpoint());
    if (options_.eval_data.empty() || !schedule_.enabled()) continue;
    PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/false));
    if (!lead) continue;  // the lead scores this worker's share
    if (schedule_.by_epochs()) {
      PS_RETURN_IF_ERROR(LookAtEpochRounds(/*now=*/false));
      continue;
    }
    // The others are at this step too: a round here is theirs to score and
    // this lead's to gather.
    const int round = schedule_.RoundAtStep(clock_);
    if (round < 0) continue;
    next_collect_ = std::max(next_collect_, round);
    eval_round_ = round + 1;
    PS_RETURN_IF_ERROR(Collect(round, clock_, /*final_round=*/false, &result_, options_.eval_part_timeout));
    PS_RETURN_IF_ERROR(JudgeRound(round, clock_, /*final_round=*/false, result_));
  }
  return absl::OkStatus();
}

absl::Status Trainer::FinalEvaluation() {
  // Adopted shards' evaluation rows first: the lead waits for them.
  for (const AdoptedShard& a : adopted_) {
    PS_RETURN_IF_ERROR(Evaluate(eval_round_, clock_, &result_, /*final_round=*/true, a.rank));
  }
  PS_RETURN_IF_ERROR(Evaluate(eval_round_, clock_, &result_, /*final_round=*/true, rank_));
  return eval_error_;
}

absl::Status Trainer::Evaluate(int round, int64_t clock, TrainResult* result, bool final_round,
                              int shard) {
  std::vector<float> probs, labels;
  absl::Status scored = Score(shard, clock, &probs, &labels);
  if (scored.ok()) {
    return Gather(round, EncodeEvalBlob(probs, labels), result, clock, final_round, shard);
  }
  if (!final_round) return scored;
  // After training: the lead learns of the failure at once and still
  // saves the model.
  scored = Annotate(scored, absl::StrCat("evaluating --eval_data=", absl::StrJoin(options_.eval_data, ","),
                                         " (shard ", shard, ") after training"));
  spdlog::error("{}", scored.ToString());
  if (eval_error_.ok()) eval_error_ = scored;
  return Gather(round, EncodeEvalError(scored.message()), result, clock, final_round, shard);
}

absl::Status Trainer::Gather(int round, const Buffer& part, TrainResult* result, int64_t clock,
                             bool final_round, int shard) {
  std::string key = EvalKey(round, final_round);
  if (!final_round && shard == rank_) {
    // The lead learns of the round here when it has not reached it itself
    // (RoundReady). Its value: the step this worker reached the round at,
    // stored before the part, so a round whose parts are in has its step.
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(ReachedKey(round), Buffer::FromString(std::to_string(clock))));
  }
  PS_RETURN_IF_ERROR(coordinator_->StoreSet(key + std::to_string(shard), part));
  if (shard != rank_) return absl::OkStatus();
  if (!final_round && schedule_.by_epochs()) return absl::OkStatus();  // gathered when all parts are in
  const absl::Time until = absl::Now() + options_.verdict_timeout;
  WaitLog log;
  while (true) {
    PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
    if (lead) {
      if (elastic_) PS_RETURN_IF_ERROR(CatchUpRounds(round, result));
      absl::Status st = Collect(round, clock, final_round, result, options_.eval_part_timeout);
      if (final_round) final_collected_ = true;  // (or tried: not again in FinishRun)
      PS_RETURN_IF_ERROR(st);
      return JudgeRound(round, clock, final_round, *result);
    }
    if (final_round || !JudgesRounds()) return absl::OkStatus();
    PS_ASSIGN_OR_RETURN(bool decided, LookForVerdict(round, clock));
    if (decided) return absl::OkStatus();
    if (log.Due()) {
      spdlog::info("waiting for the lead worker's verdict on the evaluation at step {} ({:.0f} s so "
                   "far): it gathers the round once every worker has scored its part",
                   clock, log.seconds());
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(
          absl::StrCat("no verdict from the lead worker (worker ", lead_, ") on the evaluation at step ",
                       clock, " within ", absl::FormatDuration(options_.verdict_timeout)));
    }
  }
}

absl::Status Trainer::Collect(int round, int64_t clock, bool final_round, TrainResult* result,
                              absl::Duration timeout) {
  std::string key = EvalKey(round, final_round);
  std::vector<float> all_probs, all_labels;
  std::vector<int> scored_here;
  for (int w = 0; w < num_workers_; ++w) {
    bool score_here = false;
    PS_ASSIGN_OR_RETURN(std::optional<Buffer> part,
                        FromWorker(key, w, final_round, timeout, clock, &score_here));
    if (score_here) {
      // Out of data before this round: its share is scored with the model
      // as it is now.
      PS_RETURN_IF_ERROR(Annotate(Score(w, clock, &all_probs, &all_labels),
                                  absl::StrCat("scoring worker ", w, "'s evaluation share")));
      scored_here.push_back(w);
      continue;
    }
    if (!part) continue;
    PS_RETURN_IF_ERROR(AppendEvalBlob(*part, absl::StrCat("worker ", w), &all_probs, &all_labels));
  }
  if (!scored_here.empty()) {
    spdlog::debug("the evaluation at step {}: the shares of worker(s) {} (out of data) scored by the lead",
                  clock, absl::StrJoin(scored_here, ", "));
  }
  // The final round is the model of the job's last step, whichever
  // worker took it.
  if (final_round) clock = std::max(clock, job_steps_);
  // A model of several heads: each head's metrics; the first head's are
  // the job's (the log's and dashboard's AUC, --keep_best, early stopping).
  std::vector<HeadEval> heads;
  BinaryMetrics m;
  if (OneLabelHead(model_->heads())) {
    m = ComputeBinaryMetrics(all_probs, all_labels);
  } else {
    heads = EvaluateHeads(model_->heads(), all_probs, all_labels);
    m = heads[0].binary;
  }
  last_eval_auc_ = m.auc;
  last_eval_step_ = clock;
  if (options_.train_metrics != nullptr) {
    for (const HeadEval& h : heads) {
      options_.train_metrics->OnHeadEval(h.name, h.regression ? NAN : h.binary.auc,
                                         h.regression ? h.mse : h.binary.logloss);
    }
    options_.train_metrics->OnEval(clock, m.auc, m.logloss);
  }
  RecordEval(m, clock,
             final_round || !schedule_.by_epochs()
                 ? absl::StrCat("at step ", clock)
                 : absl::StrCat("after epoch ", schedule_.EpochOf(round), " (step ", clock, ")"),
             SecondsSince(process_start_), metrics_.get(), result, heads);
  if (!final_round) {
    next_collect_ = std::max(next_collect_, round + 1);
    if (elastic_) {
      // A lead that takes over from this one gathers only the rounds after.
      PS_RETURN_IF_ERROR(coordinator_->StoreSet("eval_done", Buffer::FromString(std::to_string(round))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Buffer>> Trainer::FromWorker(const std::string& key, int w,
                                                          bool final_round, absl::Duration timeout,
                                                          int64_t clock, bool* score_here) {
  if (score_here != nullptr) *score_here = false;
  absl::Time until = absl::Now() + timeout;
  WaitLog log;
  for (bool first = true;; first = false) {
    // A first look without waiting: a dead worker's part is not waited for
    // a second in every round.
    absl::Duration wait = first ? absl::ZeroDuration()
                                : std::min(kStorePollSlice, std::max(absl::ZeroDuration(), until - absl::Now()));
    auto b = coordinator_->StoreGet(key + std::to_string(w), wait);
    if (b.ok()) return std::optional<Buffer>(*std::move(b));
    if (b.status().code() != absl::StatusCode::kDeadlineExceeded &&
        b.status().code() != absl::StatusCode::kNotFound) {
      return b.status();
    }
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "worker ", w, " did not hand over its part of ", key, " within ",
          absl::FormatDuration(timeout), " (is its process alive?)"));
    }
    // A dead worker's part comes from its adopter (final evaluation and
    // summary), or not at all.
    if (coordinator_->StoreGet(absl::StrCat("dead/", w), absl::ZeroDuration()).ok() &&
        !(final_round && coordinator_->StoreGet(absl::StrCat("adopted/", w), absl::ZeroDuration()).ok())) {
      spdlog::warn("worker {} died: {} without its part", w, key);
      return std::optional<Buffer>();
    }
    // A round past the end of worker w's data: it stores its last part
    // before it says it is out of data, so one more look finds that, and
    // otherwise its share is scored here.
    if (!final_round && coordinator_->StoreGet(TrainedKey(w), absl::ZeroDuration()).ok()) {
      auto last = coordinator_->StoreGet(key + std::to_string(w), absl::ZeroDuration());
      if (last.ok()) return std::optional<Buffer>(*std::move(last));
      if (score_here == nullptr) {
        spdlog::info("worker {} has finished training: {} without its part", w, key);
      } else {
        *score_here = true;
      }
      return std::optional<Buffer>();
    }
    // Worker w was dropped and re-admitted past this round: it will not
    // score it, so its share is scored here.
    if (!final_round && score_here != nullptr && clock >= 0) {
      auto resumed = coordinator_->StoreGet(absl::StrCat("resumed/", w), absl::ZeroDuration());
      int64_t at = -1;
      if (resumed.ok() &&
          absl::SimpleAtoi(std::string(reinterpret_cast<const char*>(resumed->data()), resumed->size()), &at) &&
          schedule_.ResumedPast(at, clock)) {
        auto last = coordinator_->StoreGet(key + std::to_string(w), absl::ZeroDuration());
        if (last.ok()) return std::optional<Buffer>(*std::move(last));
        *score_here = true;
        return std::optional<Buffer>();
      }
    }
    if (log.Due()) {
      spdlog::info("the evaluation at step {} waits for worker {}'s part ({:.0f} s so far): it has "
                   "not reached that round yet",
                   clock, w, log.seconds());
    }
  }
}

absl::Status Trainer::CatchUpRounds(int round, TrainResult* result) {
  if (!schedule_.enabled()) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(int done, trainer_store::StoredInt(coordinator_, "eval_done", -1));
  for (int r = std::max(done + 1, first_round_); r < round; ++r) {
    PS_ASSIGN_OR_RETURN(const int64_t step, RoundClock(r));
    spdlog::warn("the evaluation at {} was in flight when the lead worker died: gathering it "
                 "here, without the dead worker's part",
                 schedule_.Where(r));
    absl::Status st = Collect(r, step, /*final_round=*/false, result, kCatchUpTimeout);
    if (st.code() == absl::StatusCode::kDeadlineExceeded) {
      spdlog::warn("skipping the evaluation at {}: a part is still missing ({})", schedule_.Where(r),
                   st.ToString());
      continue;
    }
    PS_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
