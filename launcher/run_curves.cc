#include "launcher/run_curves.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::launcher {
namespace {

using nlohmann::json;

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return NAN;
  return it->get<double>();
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string b = slash == std::string::npos ? path : path.substr(slash + 1);
  if (b.size() > 6 && b.compare(b.size() - 6, 6, ".jsonl") == 0) b.resize(b.size() - 6);
  return b;
}

// The event of a record; older files have none: guessed from the fields.
std::string EventOf(const json& j) {
  std::string event = j.value("event", "");
  if (!event.empty()) return event;
  return j.contains("loss") ? "progress" : j.contains("oracle_auc") ? "summary"
         : j.contains("eval_auc") ? "eval" : "";
}

// The "<head>.eval_auc" and ".eval_logloss" fields of eval line `j` into
// r's heads (a head first seen here starts with NaN for the lines before),
// every head's curves as long as r.eval_step.
void AddHeadEvals(const json& j, RunCurves* r) {
  constexpr size_t kMaxHeads = 32;  // a bound on what a file may claim
  const size_t n = r->eval_step.size();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    for (const char* suffix : {".eval_auc", ".eval_logloss"}) {
      const size_t len = std::char_traits<char>::length(suffix);
      if (key.size() <= len || key.compare(key.size() - len, len, suffix) != 0) continue;
      const std::string head = key.substr(0, key.size() - len);
      auto h = std::find_if(r->heads.begin(), r->heads.end(),
                            [&head](const RunCurves::Head& x) { return x.name == head; });
      if (h == r->heads.end()) {
        if (r->heads.size() >= kMaxHeads) continue;
        h = r->heads.insert(r->heads.end(), RunCurves::Head{head, {}, {}});
      }
      std::vector<double>& curve = suffix[6] == 'a' ? h->auc : h->logloss;
      curve.resize(n, NAN);
      curve[n - 1] = it->is_number() ? it->get<double>() : NAN;
    }
  }
  for (RunCurves::Head& h : r->heads) {
    h.auc.resize(n, NAN);
    h.logloss.resize(n, NAN);
  }
}

}  // namespace

absl::StatusOr<std::vector<RunCurves>> ReadRunCurves(const std::string& path,
                                                     const std::string& name, int* skipped) {
  PS_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));  // names the path
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty (no metrics lines)"));
  }
  std::vector<RunCurves> runs;
  int cut = 0;
  bool open_run = false;  // the last run still takes lines
  bool any_record = false;
  double last_step = -1;
  auto current = [&]() -> RunCurves& {
    if (!open_run) {
      RunCurves r;
      r.name = runs.empty() ? name : absl::StrCat(name, " #", runs.size() + 1);
      r.file = path;
      runs.push_back(std::move(r));
      open_run = true;
      last_step = -1;
    }
    return runs.back();
  };
  // A new run appended to the same file starts its steps again.
  auto restart_if_back = [&](double step) {
    if (open_run && std::isfinite(step) && step < last_step) open_run = false;
  };
  size_t start = 0;
  int number = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    const bool last_cut = nl == std::string::npos;
    if (last_cut) nl = text.size();
    std::string_view line(text.data() + start, nl - start);
    start = nl + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (last_cut) {  // the writer was stopped mid-line
        ++cut;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", number, ": not a JSON object (a --metrics_out file has one a line): ",
          std::string(line.substr(0, 60)), line.size() > 60 ? "..." : ""));
    }
    const std::string event = EventOf(j);
    const double step = Number(j, "step");
    if (event == "progress") {
      restart_if_back(step);
      RunCurves& r = current();
      r.step.push_back(step);
      r.loss.push_back(Number(j, "loss"));
      r.samples_per_sec.push_back(Number(j, "samples_per_sec"));
      r.elapsed.push_back(Number(j, "elapsed_seconds"));
      if (std::isfinite(step)) last_step = step;
    } else if (event == "eval") {
      restart_if_back(step);
      RunCurves& r = current();
      r.eval_step.push_back(step);
      r.eval_auc.push_back(Number(j, "eval_auc"));
      r.eval_logloss.push_back(Number(j, "eval_logloss"));
      r.eval_ne.push_back(Number(j, "eval_ne"));
      r.eval_calibration.push_back(Number(j, "eval_calibration"));
      r.eval_elapsed.push_back(Number(j, "elapsed_seconds"));
      AddHeadEvals(j, &r);
      if (std::isfinite(step)) last_step = step;
    } else if (event == "summary") {
      current().summary_json = j.dump();
      open_run = false;  // whatever follows is another run
    } else {
      continue;  // another event (or none): not a curve
    }
    any_record = true;
  }
  if (skipped != nullptr) *skipped = cut;
  if (!any_record) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no progress, eval or summary records (is it a --metrics_out file?)"));
  }
  return runs;
}

std::vector<std::string> DefaultRunNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  bool unique = true;
  for (const std::string& p : paths) {
    names.push_back(BaseName(p));
    unique = unique && seen.insert(names.back()).second;
  }
  if (!unique) names = paths;
  return names;
}

bool AnyValue(const std::vector<RunCurves>& runs, std::vector<double> RunCurves::*curve) {
  for (const RunCurves& r : runs) {
    for (double v : r.*curve) {
      if (std::isfinite(v)) return true;
    }
  }
  return false;
}

}  // namespace pstrain::launcher
