#include "launcher/finished_job.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace pstrain::launcher {
namespace {

using nlohmann::json;

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// {name, t, v} over the finite points of (x, y), at most `max_points`.
json Series(const std::string& name, const std::vector<double>& x, const std::vector<double>& y,
            size_t max_points) {
  std::vector<size_t> keep;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    if (std::isfinite(x[i]) && std::isfinite(y[i])) keep.push_back(i);
  }
  const size_t stride =
      max_points > 0 && keep.size() > max_points ? (keep.size() + max_points - 1) / max_points : 1;
  json t = json::array(), v = json::array();
  for (size_t k = 0; k < keep.size(); ++k) {
    if (k % stride != 0 && k + 1 != keep.size()) continue;
    t.push_back(x[keep[k]]);
    v.push_back(y[keep[k]]);
  }
  return {{"name", name}, {"t", std::move(t)}, {"v", std::move(v)}};
}

double Last(const std::vector<double>& v) {
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    if (std::isfinite(*it)) return *it;
  }
  return NAN;
}

}  // namespace

std::string FinishedJobStateJson(const std::vector<RunCurves>& runs,
                                 const std::vector<JobCheckpoint>& checkpoints,
                                 const std::string& source, size_t max_points) {
  json summary = nullptr;
  double ended = NAN;
  json loss = json::array(), sps = json::array(), auc = json::array(), logloss = json::array(),
       ne = json::array(), calibration = json::array();
  for (const RunCurves& r : runs) {
    loss.push_back(Series(r.name, r.step, r.loss, max_points));
    sps.push_back(Series(r.name, r.step, r.samples_per_sec, max_points));
    // A model of several heads: a line per head with an AUC (a regression
    // head has none) in place of the run's one (its first head's).
    bool by_head = false;
    for (const RunCurves::Head& h : r.heads) {
      if (std::none_of(h.auc.begin(), h.auc.end(), [](double v) { return std::isfinite(v); })) {
        continue;
      }
      const std::string name = runs.size() == 1 ? h.name : absl::StrCat(r.name, " ", h.name);
      auc.push_back(Series(name + " AUC", r.eval_step, h.auc, max_points));
      logloss.push_back(Series(name + " logloss", r.eval_step, h.logloss, max_points));
      by_head = true;
    }
    if (!by_head) {
      auc.push_back(Series(r.name, r.eval_step, r.eval_auc, max_points));
      logloss.push_back(Series(r.name, r.eval_step, r.eval_logloss, max_points));
    }
    ne.push_back(Series(r.name, r.eval_step, r.eval_ne, max_points));
    calibration.push_back(Series(r.name, r.eval_step, r.eval_calibration, max_points));
    json s = json::parse(r.summary_json, nullptr, false);
    if (!s.is_discarded() && s.is_object()) summary = s;  // the last run's
    ended = std::isfinite(Last(r.elapsed)) ? Last(r.elapsed) : ended;
  }
  json out;
  const bool finished = summary.is_object();
  if (finished && summary.contains("wall_seconds")) ended = summary.value("wall_seconds", ended);
  out["now"] = Num(ended);
  out["source"] = source;
  out["x_label"] = "step";
  out["summary"] = summary;
  json job;
  job["state"] = finished ? "finished" : "ended";
  job["message"] = finished ? "" : "no summary line: the job stopped before it finished";
  job["servers"] = nullptr;
  job["workers"] = finished && summary.contains("workers") ? summary["workers"] : json(nullptr);
  job["consistency"] = "";
  job["staleness"] = 0;
  job["heartbeat_interval"] = 0;
  job["heartbeat_timeout"] = 0;
  job["ended"] = Num(ended);
  out["job"] = std::move(job);
  out["nodes"] = json::array();
  json series;
  series["loss"] = std::move(loss);
  series["samples_per_sec"] = std::move(sps);
  series["eval_auc"] = std::move(auc);
  series["eval_logloss"] = std::move(logloss);
  if (AnyValue(runs, &RunCurves::eval_ne)) series["eval_ne"] = std::move(ne);
  if (AnyValue(runs, &RunCurves::eval_calibration)) series["eval_calibration"] = std::move(calibration);
  series["rss_mib"] = json::array();
  series["requests_per_sec"] = json::array();
  out["series"] = std::move(series);
  json cps = json::array();
  for (const JobCheckpoint& c : checkpoints) {
    cps.push_back({{"step", c.step},
                   {"time_unix", c.time_unix},
                   {"duration_seconds", nullptr},
                   {"bytes", c.bytes},
                   {"path", c.path},
                   {"ok", true},
                   {"message", ""}});
  }
  out["checkpoints"] = std::move(cps);
  return out.dump();
}

}  // namespace pstrain::launcher
