// The Trainer's --keep_best and --early_stop_rounds: the lead judges every
// evaluation round it gathers (BestRound), and
//   - keep_best: a round better than all before it has its model exported
//     to --save_model at once (written to DIR.tmp and swapped in whole, so
//     DIR always holds one complete model), its round, step and metrics in
//     the manifest; the final save then keeps that folder instead of
//     writing the last model;
//   - the best round so far goes to store key "best_round", so that a lead
//     that takes over (elastic) or a retried attempt (a server rollback)
//     goes on from it and never replaces the kept model by a worse one;
//   - at every periodic round the lead stores its verdict, "stop" or "go"
//     (key "verdict/<cluster epoch>/<round>"), after any export. The other
//     workers wait for it right after storing their part of the round, so
//     all of them stop after the same step, and none pushes while the lead
//     exports (the export is the evaluated model, under any consistency).
//     A lead out of data gathers the rounds the others reach, so every
//     round gets a verdict; a worker that finds itself the lead meanwhile
//     gathers the round itself. Epoch rounds are not waited at (they fall
//     at different steps on different workers): the lead's latest verdict
//     ("verdict/<cluster epoch>/last") is looked at once a second.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/trainer.h"
#include "worker/trainer_store.h"

namespace pstrain::worker {
namespace {

constexpr char kBestKey[] = "best_round";

std::string Text(const Buffer& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

}  // namespace

std::string Trainer::VerdictKey(int round) const {
  return absl::StrCat("verdict/", kv_->layout().epoch, "/", round);
}

std::string Trainer::LastVerdictKey() const {
  return absl::StrCat("verdict/", kv_->layout().epoch, "/last");
}

absl::Status Trainer::LoadBest() {
  auto stored = coordinator_->StoreGet(kBestKey, absl::ZeroDuration());
  if (!stored.ok()) {
    if (trainer_store::Missing(stored.status())) return absl::OkStatus();
    return Annotate(stored.status(), "reading the best evaluation round so far");
  }
  PS_RETURN_IF_ERROR(best_->Restore(Text(*stored)));
  best_exported_ = options_.keep_best.has_value();
  const EvalRound& b = *best_->best();
  spdlog::info("the best evaluation so far (before this attempt or lead): round {} at step {}, {} "
               "{:.4f}",
               b.round, b.step, EvalMetricName(best_->metric()), best_->Value(b));
  return absl::OkStatus();
}

absl::Status Trainer::JudgeRound(int round, int64_t clock, bool final_round,
                                 const TrainResult& result) {
  if (!best_) return absl::OkStatus();
  EvalRound r{round + 1, clock, result.eval_auc, result.eval_logloss};
  for (const HeadEval& h : result.eval_heads) {
    if (h.name == options_.keep_best_head) {  // --keep_best=HEAD.metric
      r.auc = h.binary.auc;
      r.logloss = h.regression ? h.mse : h.binary.logloss;
    }
  }
  const std::string metric = options_.keep_best_head.empty()
                                 ? std::string(EvalMetricName(best_->metric()))
                                 : absl::StrCat(options_.keep_best_head, ".", EvalMetricName(best_->metric()));
  if (best_->Offer(r)) {
    std::string kept;
    if (options_.keep_best) {
      PS_RETURN_IF_ERROR(SaveModel(clock, &r));
      best_exported_ = true;
      kept = absl::StrCat(": its model is kept in ", options_.save_model);
    }
    PS_RETURN_IF_ERROR(coordinator_->StoreSet(kBestKey, Buffer::FromString(best_->Encode())));
    spdlog::info("round {} (step {}): {} {:.4f} is the best so far{}", r.round, clock, metric,
                 best_->Value(r), kept);
  } else if (best_->best()) {
    const EvalRound& b = *best_->best();
    // The evaluation line has the numbers: this one matters when it counts
    // towards an early stop.
    spdlog::log(options_.early_stop_rounds > 0 ? spdlog::level::info : spdlog::level::debug,"round {} (step {}): {} {:.4f}, not better than round {} (step {}, {:.4f}): {} "
                 "evaluation(s) without improvement{}",
                 r.round, clock, metric, best_->Value(r), b.round, b.step, best_->Value(b),
                 best_->rounds_since_best(),
                 options_.early_stop_rounds > 0 && !final_round
                     ? absl::StrCat(" (training stops at ", options_.early_stop_rounds, ")")
                     : std::string());
  } else {
    spdlog::warn("round {} (step {}): {} is not a number: not comparable", r.round, clock, metric);
  }
  if (final_round) return absl::OkStatus();
  stop_ = best_->ShouldStop();
  if (stop_) {
    const EvalRound& b = *best_->best();
    spdlog::info("early stop at step {}: {} has not improved for {} evaluations (best {:.4f}, "
                 "round {} at step {}); {}",
                 clock, metric, best_->rounds_since_best(), best_->Value(b), b.round, b.step,
                 schedule_.by_epochs() ? "the other workers stop at their next look (within a second)"
                                       : "every worker stops training now");
  }
  PS_RETURN_IF_ERROR(coordinator_->StoreSet(VerdictKey(round), Buffer::FromString(stop_ ? "stop" : "go")));
  return coordinator_->StoreSet(LastVerdictKey(), Buffer::FromString(stop_ ? "stop" : "go"));
}

absl::StatusOr<bool> Trainer::LookForVerdict(int round, int64_t clock) {
  auto verdict = coordinator_->StoreGet(VerdictKey(round), trainer_store::kPollSlice);
  if (!verdict.ok() && !trainer_store::Missing(verdict.status())) {
    return Annotate(verdict.status(), "waiting for the lead worker's verdict");
  }
  if (!verdict.ok()) {
    if (options_.recover_epoch != nullptr && options_.recover_epoch->load() > kv_->layout().epoch) {
      return absl::AbortedError("a server failed during an evaluation round: the cluster rolls "
                                "back to its latest checkpoint");
    }
    return false;
  }
  if (Text(*verdict) == "stop") {
    stop_ = true;
    spdlog::info("early stop at step {}: the lead worker's verdict (the evaluation has not "
                 "improved for {} rounds)",
                 clock, options_.early_stop_rounds);
  }
  return true;
}

}  // namespace pstrain::worker
