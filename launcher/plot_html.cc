#include "launcher/plot_html.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/coordinator/dashboard/web_assets.h"

namespace pstrain::launcher {
namespace {

using nlohmann::json;

json Array(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? json(x) : json(nullptr));
  return a;
}

void ReplaceOnce(std::string* s, const std::string& marker, std::string_view with) {
  size_t at = s->find(marker);
  if (at != std::string::npos) s->replace(at, marker.size(), with);
}

}  // namespace

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
                 {"logloss", Array(r.eval_logloss)},
                 {"ne", Array(r.eval_ne)},
                 {"calibration", Array(r.eval_calibration)}};
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

}  // namespace pstrain::launcher
