#include "launcher/rerun.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "server/coordinator/coordinator_journal.h"

namespace pstrain::launcher {
namespace {

// The lead worker's summary line, kept in the journal's store ({} when the
// job ended without one, or an older build wrote only "1").
nlohmann::json StoredSummary(const server::JobJournal& j) {
  for (const server::JournalStoreEntry& e : j.store) {
    if (e.key != "summary") continue;
    nlohmann::json s = nlohmann::json::parse(e.value, nullptr, /*allow_exceptions=*/false);
    if (s.is_object()) return s;
  }
  return nlohmann::json::object();
}

double Number(const nlohmann::json& s, const char* key) {
  auto it = s.find(key);
  return it != s.end() && it->is_number() ? it->get<double>() : NAN;
}

}  // namespace

absl::StatusOr<Rerun> DecideRerun(const std::string& checkpoint_dir, int epochs, bool new_job,
                                  bool continue_job) {
  Rerun r;
  if (checkpoint_dir.empty() || new_job || continue_job) return r;
  const std::string path = server::CoordinatorJournal::PathIn(checkpoint_dir);
  PS_ASSIGN_OR_RETURN(std::optional<server::JobJournal> j, server::CoordinatorJournal::Load(path));
  if (!j || j->state != server::JobState::kFinished) return r;
  const nlohmann::json s = StoredSummary(*j);
  const double done_epochs = Number(s, "epochs");
  std::string what = absl::StrCat("the job in ", checkpoint_dir, " finished");
  if (j->final_step > 0) absl::StrAppend(&what, " at step ", j->final_step);
  if (std::isfinite(done_epochs)) {
    absl::StrAppend(&what, " after ", done_epochs, done_epochs == 1 ? " epoch" : " epochs");
  }
  if (!j->ended.empty()) absl::StrAppend(&what, " (", j->ended, ")");
  if (const double auc = Number(s, "eval_auc"); std::isfinite(auc)) {
    absl::StrAppend(&what, absl::StrFormat(": eval AUC %.4f, logloss %.4f", auc, Number(s, "eval_logloss")));
  }
  if (auto m = s.find("model_dir"); m != s.end() && m->is_string()) {
    absl::StrAppend(&what, "; its model is in ", m->get<std::string>());
  }
  if (std::isfinite(done_epochs) && epochs > done_epochs) {
    if (!std::filesystem::exists(checkpoint_dir + "/LATEST")) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ". --epochs=", epochs, " would train it on, but it left no checkpoint to train on "
          "from (it ran without --checkpoint_every_steps or --checkpoint_every_secs): --new_job "
          "trains a new job from scratch"));
    }
    r.action = Rerun::Action::kContinue;
    r.message = absl::StrCat(what, ". --epochs=", epochs, " trains it on from its latest checkpoint");
    return r;
  }
  r.action = Rerun::Action::kReport;
  r.message = absl::StrCat(
      what, ". Nothing to train: ",
      std::isfinite(done_epochs) ? absl::StrCat("--epochs above ", done_epochs, " trains it on, ")
                                 : std::string(),
      "--new_job trains a new job from scratch (the old one is kept in ", checkpoint_dir,
      "/previous-<time>)");
  return r;
}

}  // namespace pstrain::launcher
