// The lead worker: who gathers the evaluation, writes --metrics_out and the
// summary and saves the model, and how another worker takes that over.
//
// The lead is worker 0. With --elastic_workers the coordinator publishes it
// under store key "lead" (its presence is how a worker knows the job is
// elastic) and, when the lead is dropped, names the lowest-ranked worker
// still in the job (server/coordinator/elastic_workers.h). Workers read the key at
// every evaluation round, every 2 s while training (progress reports), and at
// the end. A worker that finds itself the lead opens --metrics_out (appending:
// the old lead's lines stay) and from then on does what worker 0 did:
//   - evaluation rounds: an earlier round the dead lead had not written
//     (the lead records each one it wrote, "eval_done") is gathered at the
//     new lead's next round, without the dead worker's part (a part still
//     missing after 30 s skips that round, with a warning), so a round in
//     flight is completed late or skipped, never waited for forever;
//   - rounds past the end of another worker's training do not wait for
//     its part (worker/trainer_rounds.cc); the final evaluation has a key
//     of its own ("eval/final/"), not a round number;
//   - the end: in an elastic job the other workers, their statistics
//     stored, wait for the lead's "summary" key, asking every second whether
//     they are the lead now; so a lead that dies during the final evaluation
//     is replaced by one that gathers it and writes the summary.
// Without --elastic_workers worker 0 is the lead and nothing is asked.
#include <cmath>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/eval/eval_blob.h"
#include "data/eval/metrics.h"
#include "worker/run_report.h"
#include "worker/train_metrics.h"
#include "worker/trainer.h"
#include "worker/trainer_store.h"
#include "worker/wait_log.h"

namespace pstrain::worker {
namespace {

// How stale a worker's idea of the lead may get while it trains: one store
// read every 2 s is nothing next to the steps in between.
constexpr absl::Duration kLeadPollInterval = absl::Seconds(2);
using trainer_store::Missing;
constexpr absl::Duration kStorePollSlice = trainer_store::kPollSlice;

// `st` with `suffix` appended to its message.
absl::Status WithSuffix(const absl::Status& st, absl::string_view suffix) {
  return absl::Status(st.code(), absl::StrCat(st.message(), suffix));
}

// The "oracle_auc" number of a generator meta file, or NaN (with a
// warning when it cannot be read).
double OracleAuc(const std::string& path) {
  absl::StatusOr<double> oracle = ReadOracleAuc(path);
  if (oracle.ok()) return *oracle;
  spdlog::warn("cannot read {}: {}", path, oracle.status().ToString());
  return NAN;
}

}  // namespace

absl::StatusOr<int> trainer_store::StoredInt(CoordinatorClient* coordinator, const std::string& key,
                                             int otherwise) {
  auto b = coordinator->StoreGet(key, absl::ZeroDuration());
  if (!b.ok()) {
    if (Missing(b.status())) return otherwise;
    return Annotate(b.status(), absl::StrCat("reading store key ", key));
  }
  std::string text(reinterpret_cast<const char*>(b->data()), b->size());
  int v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::DataLossError(absl::StrCat("store key ", key, " holds no number: '", text, "'"));
  }
  return v;
}

absl::Status Trainer::LearnLead() {
  auto b = coordinator_->StoreGet("lead", absl::ZeroDuration());
  if (!b.ok() && !Missing(b.status())) return Annotate(b.status(), "asking who the lead worker is");
  elastic_ = b.ok();
  PS_ASSIGN_OR_RETURN(lead_, trainer_store::StoredInt(coordinator_, "lead", 0));
  lead_checked_ = absl::Now();
  if (elastic_ && lead_ != 0) spdlog::info("worker {} is the lead worker", lead_);
  return absl::OkStatus();
}

absl::StatusOr<bool> Trainer::IsLead(bool now) {
  if (lead_ == rank_) return true;  // never handed back
  if (!elastic_ || (!now && absl::Now() - lead_checked_ < kLeadPollInterval)) return false;
  PS_ASSIGN_OR_RETURN(int lead, trainer_store::StoredInt(coordinator_, "lead", lead_));
  lead_checked_ = absl::Now();
  if (lead != lead_ && lead == rank_) {
    spdlog::warn("worker {} was dropped: this worker (worker {}) is the lead now; it gathers the "
                 "evaluation, writes the summary{}{}",
                 lead_, rank_, options_.metrics_out.empty() ? "" : " and appends to " + options_.metrics_out,
                 options_.save_model.empty() ? "" : " and saves the model");
    if (metrics_ != nullptr) PS_RETURN_IF_ERROR(metrics_->Attach(options_.metrics_out));
    lead_ = lead;
    if (best_) PS_RETURN_IF_ERROR(LoadBest());
  }
  lead_ = lead;
  return lead_ == rank_;
}

absl::Status Trainer::FinishRun(int64_t clock, int final_round, absl::Status eval_status,
                                TrainResult* result) {
  PS_RETURN_IF_ERROR(StoreStats(*result));
  // What the lead may still wait for: the evaluation parts, the statistics.
  const absl::Time until = absl::Now() + options_.eval_part_timeout + options_.stats_timeout;
  WaitLog log;
  while (true) {
    if (log.Due()) {
      spdlog::info("waiting for the lead worker (worker {}) to write the summary ({:.0f} s so far)",
                   lead_, log.seconds());
    }
    PS_ASSIGN_OR_RETURN(bool lead, IsLead(/*now=*/true));
    if (lead) return FinishAsLead(clock, final_round, std::move(eval_status), result);
    // A worker whose final evaluation failed stays until the lead has saved
    // the model: its exit would end the job first (pstrain local stops
    // every process when one fails).
    if (!elastic_ && eval_status.ok()) return absl::OkStatus();
    if (options_.recover_epoch != nullptr && options_.recover_epoch->load() > kv_->layout().epoch) {
      return absl::AbortedError("a server failed while the lead worker wrote the summary: the "
                                "cluster rolls back to its latest checkpoint");
    }
    // Wait for the lead's summary, ready to take over if it dies first.
    auto written = coordinator_->StoreGet("summary", kStorePollSlice);
    if (written.ok()) {
      return eval_status.ok() ? eval_status
                              : WithSuffix(eval_status, "; the lead worker has finished the run");
    }
    if (!Missing(written.status())) return Annotate(written.status(), "waiting for the summary");
    if (!elastic_ && absl::Now() > until) {
      return WithSuffix(eval_status, "; the lead worker did not finish the run in time");
    }
  }
}

absl::Status Trainer::FinishAsLead(int64_t clock, int final_round, absl::Status eval_status,
                                   TrainResult* result) {
  if (eval_status.ok() && !options_.eval_data.empty() && !final_collected_) {
    // The lead died during the final evaluation: gather it here.
    eval_status = CatchUpRounds(final_round, result);
    if (eval_status.ok()) {
      eval_status = Collect(final_round, clock, /*final_round=*/true, result,
                            options_.eval_part_timeout);
    }
    if (eval_status.ok()) eval_status = JudgeRound(final_round, clock, /*final_round=*/true, *result);
    final_collected_ = true;
  }
  // The waiting workers leave once this key is set, whatever the outcome.
  auto done = [this] { return coordinator_->StoreSet("summary", Buffer::FromString("1")); };
  PS_ASSIGN_OR_RETURN(auto totals, JobTotals());
  if (totals.samples == 0 && kv_->layout().restored_step <= 0) {
    PS_RETURN_IF_ERROR(done());
    return absl::FailedPreconditionError(
        absl::StrCat("no rows were trained: --train_data=", absl::StrJoin(options_.train_data, ","),
                     " gave no row to any worker (empty, blank or unparsable files?)"));
  }
  std::string saved;
  if (!options_.export_dir.empty() && export_step_ != clock) {
    // The last version: what the job ends with is served too.
    PS_RETURN_IF_ERROR(ExportVersion(clock));
  }
  if (!options_.save_model.empty()) {
    if (best_exported_) {
      const EvalRound& b = *best_->best();
      spdlog::info("--keep_best: {} holds the model of round {} (step {}), {} {:.4f}{}",
                   options_.save_model, b.round, b.step, EvalMetricName(best_->metric()),
                   best_->Value(b),
                   eval_status.ok() && b.step != clock
                       ? absl::StrFormat(", not the last one (step %d, %.4f)", clock,
                                         best_->metric() == EvalMetric::kAuc ? result->eval_auc
                                                                             : result->eval_logloss)
                       : std::string());
      saved = absl::StrCat("; the best round's model (step ", b.step, ") is in ", options_.save_model);
    } else {
      if (options_.keep_best) {
        spdlog::warn("--keep_best: no evaluation gave a finite {}: saving the last model",
                     EvalMetricName(best_->metric()));
      }
      PS_RETURN_IF_ERROR(SaveModel(clock));
      saved = absl::StrCat("; the trained model was saved to ", options_.save_model);
    }
  }
  if (!eval_status.ok()) {
    PS_RETURN_IF_ERROR(done());
    return WithSuffix(eval_status,
                      saved.empty() ? "; no --save_model: the trained model was not saved" : saved);
  }
  PS_ASSIGN_OR_RETURN(std::string summary, WriteSummary(*result, totals));
  // The summary stays in the coordinator's journal: a rerun of the finished
  // job reports it (pstrain local).
  return coordinator_->StoreSet("summary", Buffer::FromString(std::move(summary)));
}

absl::Status Trainer::StoreStats(const TrainResult& result) {
  std::string key = "stats/";
  // Samples in all (the job's total), seconds, and samples of this run
  // (the rate: what a re-admitted or resumed worker trained before is not
  // in its seconds).
  double mine[3] = {static_cast<double>(result.samples + options_.samples_before + resumed_samples_),
                    result.train_seconds, static_cast<double>(result.samples)};
  std::string blob(sizeof(mine), '\0');
  std::memcpy(blob.data(), mine, sizeof(mine));
  PS_RETURN_IF_ERROR(coordinator_->StoreSet(key + std::to_string(rank_), Buffer::FromString(std::move(blob))));
  for (const AdoptedShard& a : adopted_) {
    // What the dead worker had trained, for the job's total (its rows
    // trained here are in this worker's samples).
    double theirs[3] = {static_cast<double>(a.its_samples), 0, 0};
    std::string t(sizeof(theirs), '\0');
    std::memcpy(t.data(), theirs, sizeof(theirs));
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(key + std::to_string(a.rank), Buffer::FromString(std::move(t))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Trainer::Totals> Trainer::JobTotals() {
  std::string key = "stats/";
  Totals t;
  for (int w = 0; w < num_workers_; ++w) {
    PS_ASSIGN_OR_RETURN(std::optional<Buffer> part,
                        FromWorker(key, w, /*final_round=*/true, options_.stats_timeout, /*clock=*/-1));
    if (!part) continue;
    const Buffer& b = *part;
    double v[3];
    if (b.size() != sizeof(v)) return absl::DataLossError("malformed worker stats");
    std::memcpy(v, b.data(), sizeof(v));
    t.samples += v[0];
    t.seconds = std::max(t.seconds, v[1]);
    t.run_samples += v[2];
  }
  return t;
}

absl::StatusOr<std::string> Trainer::WriteSummary(const TrainResult& result, const Totals& totals) {
  const double samples = totals.samples, seconds = totals.seconds;
  double rate = seconds > 0 ? totals.run_samples / seconds : 0;
  double oracle = OracleAuc(options_.eval_meta);
  double wall = SecondsSince(process_start_);
  JsonLine line;
  line.Add("event", "summary").Add("model", options_.model.name).Add("workers", num_workers_);
  // Without --eval_data the eval figures are null.
  AddSummaryFigures(result,
                    JobFigures{samples, rate, oracle, wall, /*evaluated=*/!options_.eval_data.empty()},
                    &line);
  line.Add("epochs", options_.epochs);
  if (!options_.save_model.empty()) line.Add("model_dir", options_.save_model);
  if (best_ && best_->best()) {
    line.Add("early_stopped", result.early_stopped)
        .Add("best_round", best_->best()->round)
        .Add("best_step", best_->best()->step)
        .Add(absl::StrCat("best_", EvalMetricName(best_->metric())), best_->Value(*best_->best()));
  }
  metrics_->Write(line);
  std::string oracle_text = std::isfinite(oracle) ? absl::StrFormat(" (oracle %.4f)", oracle) : "";
  // Without --eval_data there is nothing to report: "none", not 0.
  const std::string eval_text =
      options_.eval_data.empty()
          ? std::string("eval_auc=none eval_logloss=none")
          : absl::StrFormat("eval_auc=%.4f%s eval_logloss=%.4f eval_ne=%.4f", result.eval_auc,
                            oracle_text, result.eval_logloss, result.eval_ne);
  // Time spent waiting for data (a stream between partitions) is not
  // training: the rate while busy beside the share of time waited (this
  // worker's share, as the job's).
  std::string busy;
  if (result.train_seconds > 0 && result.data_seconds >= 0.05 * result.train_seconds) {
    const double waiting = std::min(1.0, result.data_seconds / result.train_seconds);
    busy = absl::StrFormat(" busy_samples/s=%.0f waiting_for_data=%.0f%%",
                           waiting < 1 ? rate / (1 - waiting) : 0.0, 100 * waiting);
  }
  std::printf("RESULT model=%s %s samples/s=%.0f%s wall=%.1fs\n", options_.model.name.c_str(),
              eval_text.c_str(), rate, busy.c_str(), wall);
  std::fflush(stdout);
  return line.str();
}

}  // namespace pstrain::worker
