#include "launcher/plot_html.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"
#include "server/coordinator/dashboard/web_assets.h"

namespace pstrain::launcher {
namespace {

using nlohmann::json;

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return NAN;
  return it->get<double>();
}

json Array(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? json(x) : json(nullptr));
  return a;
}

void ReplaceOnce(std::string* s, const std::string& marker, std::string_view with) {
  size_t at = s->find(marker);
  if (at != std::string::npos) s->replace(at, marker.size(), with);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string b = slash == std::string::npos ? path : path.substr(slash + 1);
  if (b.size() > 6 && b.compare(b.size() - 6, 6, ".jsonl") == 0) b.resize(b.size() - 6);
  return b;
}

}  // namespace

absl::StatusOr<std::vector<RunCurves>> ReadRunCurves(const std::string& path,
                                                     const std::string& name, int* bad_lines) {
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<RunCurves> runs;
  int bad = 0;
  bool open_run = false;   // the last run still takes lines
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
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + start, nl - start);
    start = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      ++bad;
      continue;
    }
    std::string event = j.value("event", "");
    double step = Number(j, "step");
    if (event.empty()) {  // older files: guess from the fields
      event = j.contains("loss") ? "progress" : j.contains("oracle_auc") ? "summary"
              : j.contains("eval_auc") ? "eval" : "";
    }
    if (event == "progress") {
      // A new run appended to the same file starts its steps again.
      if (open_run && std::isfinite(step) && step < last_step) open_run = false;
      RunCurves& r = current();
      r.step.push_back(step);
      r.loss.push_back(Number(j, "loss"));
      r.samples_per_sec.push_back(Number(j, "samples_per_sec"));
      r.elapsed.push_back(Number(j, "elapsed_seconds"));
      if (std::isfinite(step)) last_step = step;
    } else if (event == "eval") {
      if (open_run && std::isfinite(step) && step < last_step) open_run = false;
      RunCurves& r = current();
      r.eval_step.push_back(step);
      r.eval_auc.push_back(Number(j, "eval_auc"));
      r.eval_logloss.push_back(Number(j, "eval_logloss"));
      if (std::isfinite(step)) last_step = step;
    } else if (event == "summary") {
      current().summary_json = j.dump();
      open_run = false;  // whatever follows is another run
    } else {
      ++bad;
      continue;
    }
    any_record = true;
  }
  if (bad_lines != nullptr) *bad_lines = bad;
  if (!any_record) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no progress, eval or summary records"));
  }
  return runs;
}

std::string PlotHtml(const std::vector<RunCurves>& runs, const std::string& title) {
  json data = json::array();
  for (const RunCurves& r : runs) {
    json j;
    j["name"] = r.name;
    j["file"] = r.file;
    j["progress"] = {{"step", Array(r.step)},
                     {"loss", Array(r.loss)},
                     {"samples_per_sec", Array(r.samples_per_sec)},
                     {"elapsed", Array(r.elapsed)}};
    j["eval"] = {{"step", Array(r.eval_step)},
                 {"auc", Array(r.eval_auc)},
                 {"logloss", Array(r.eval_logloss)}};
    j["summary"] = json::parse(r.summary_json, nullptr, false);
    if (j["summary"].is_discarded()) j["summary"] = nullptr;
    data.push_back(std::move(j));
  }
  // "</" cannot close the <script> element from inside a JSON string.
  std::string data_text = data.dump();
  for (size_t at = data_text.find("</"); at != std::string::npos; at = data_text.find("</", at + 3)) {
    data_text.replace(at, 2, "<\\/");
  }
  std::string html(web::Asset("plot.html"));
  ReplaceOnce(&html, "/*PSTRAIN_UPLOT_CSS*/", web::Asset("uPlot.min.css"));
  ReplaceOnce(&html, "/*PSTRAIN_UPLOT_JS*/", web::Asset("uPlot.iife.min.js"));
  ReplaceOnce(&html, "/*PSTRAIN_CHARTS_JS*/", web::Asset("charts.js"));
  ReplaceOnce(&html, "/*PSTRAIN_PLOT_JS*/", web::Asset("plot.js"));
  ReplaceOnce(&html, "/*PSTRAIN_DATA*/", data_text);
  std::string escaped_title;
  for (char c : title) {
    if (c == '<') escaped_title += "&lt;";
    else if (c == '>') escaped_title += "&gt;";
    else if (c == '&') escaped_title += "&amp;";
    else escaped_title += c;
  }
  ReplaceOnce(&html, "<title>pstrain curves</title>", "<title>" + escaped_title + "</title>");
  ReplaceOnce(&html, "<h1>pstrain training curves</h1>", "<h1>" + escaped_title + "</h1>");
  return html;
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

}  // namespace pstrain::launcher
