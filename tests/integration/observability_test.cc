// A real local cluster with metrics and the dashboard on: every process
// serves /metrics that parse as Prometheus text and carry its numbers, and
// the coordinator's /api/state lists every node with its heartbeat data.
#include <httplib.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "data/synthetic.h"
#include "tests/common/prometheus_text.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using nlohmann::json;

struct Url {
  std::string host;
  int port = 0;
  std::string path;
};

// "http://127.0.0.1:PORT/path" -> parts.
Url ParseUrl(const std::string& url) {
  std::smatch m;
  std::regex re("http://([^:/]+):([0-9]+)(/[^ ,]*)");
  Url u;
  if (std::regex_search(url, m, re)) {
    u.host = m[1];
    u.port = std::stoi(m[2]);
    u.path = m[3];
  }
  return u;
}

std::string Get(const Url& u, const std::string& path) {
  httplib::Client c(u.host, u.port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto res = c.Get(path.c_str());
  return res && res->status == 200 ? res->body : "";
}

// Label "who" -> /metrics URL, from the launcher's "metrics:" line.
std::map<std::string, Url> MetricsUrls(const std::string& log) {
  std::map<std::string, Url> out;
  std::regex re("(coordinator|server [0-9]+|worker [0-9]+) (http://[^ ,]+)");
  size_t at = log.find("[pstrain] metrics:");
  if (at == std::string::npos) return out;
  std::string line = log.substr(at, log.find('\n', at) - at);
  for (std::sregex_iterator it(line.begin(), line.end(), re), end; it != end; ++it) {
    out[(*it)[1]] = ParseUrl((*it)[2]);
  }
  return out;
}

TEST(Observability, EveryProcessServesMetricsAndTheDashboardListsEveryNode) {
  std::string dir = MakeTempDir("pstrain-obs");
  worker::SyntheticOptions o;
  o.seed = 5;
  o.rows = 20000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/train.tsv").ok());
  o.first_row = o.rows;
  o.rows = 2000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/eval.tsv").ok());
  // Long enough to be scraped while training (stopped by the test).
  TestProcess launcher("pstrain",
                       {"local", "--servers=2", "--workers=2", "--model=lr", "--metrics",
                        "--dashboard", "--train_data=" + dir + "/train.tsv",
                        "--eval_data=" + dir + "/eval.tsv", "--eval_every_steps=20",
                        "--epochs=1000", "--batch_size=256", "--log_every_secs=1",
                        "--heartbeat_interval=0.5", "--timeout=100"},
                       dir + "/launcher.log");
  // Wait for the addresses, then for every node to report training numbers.
  std::map<std::string, Url> urls;
  Url dashboard;
  json state;
  absl::Time give_up = absl::Now() + absl::Seconds(60);
  bool ready = false;
  while (!ready && absl::Now() < give_up && launcher.running()) {
    absl::SleepFor(absl::Milliseconds(300));
    std::string log = launcher.Log();
    urls = MetricsUrls(log);
    size_t d = log.find("[pstrain] dashboard: ");
    if (d == std::string::npos || urls.size() < 5) continue;
    dashboard = ParseUrl(log.substr(d));
    std::string body = Get(dashboard, "/api/state");
    if (body.empty()) continue;
    state = json::parse(body, nullptr, false);
    if (state.is_discarded()) continue;
    int alive = 0, with_loss = 0, with_auc = 0;
    for (const json& n : state["nodes"]) alive += n["state"] == "alive";
    for (const json& s : state["series"]["loss"]) with_loss += !s["v"].empty();
    for (const json& s : state["series"]["eval_auc"]) with_auc += !s["v"].empty();
    ready = alive == 5 && with_loss == 2 && with_auc == 1;
  }
  ASSERT_TRUE(ready) << state.dump() << "\n" << launcher.Log();
  ASSERT_EQ(urls.size(), 5u) << launcher.Log();

  // The dashboard's page and assets come from the coordinator itself.
  std::string page = Get(dashboard, "/");
  EXPECT_NE(page.find("pstrain dashboard"), std::string::npos);
  EXPECT_NE(Get(dashboard, "/uPlot.iife.min.js").find("uPlot"), std::string::npos);
  for (const json& n : state["nodes"]) {
    if (n["role"] == "coordinator") continue;
    EXPECT_GT(n["pid"].get<int>(), 0) << n.dump();
    EXPECT_GT(n["rss_bytes"].get<double>(), 1 << 20) << n.dump();
    EXPECT_LT(n["heartbeat_age"].get<double>(), 5) << n.dump();
  }

  for (const auto& [who, url] : urls) {
    std::string text = Get(url, url.path);
    PromText p = ParsePrometheusText(text);
    ASSERT_EQ(p.error, "") << who << ":\n" << text;
    EXPECT_GT(p.Value("process_resident_memory_bytes"), 0) << who;
    if (who.rfind("server", 0) == 0) {
      EXPECT_GT(p.Value("pstrain_server_request_seconds_count", {{"op", "pull"}}), 0) << text;
      EXPECT_GT(p.Value("pstrain_server_request_seconds_count", {{"op", "push"}}), 0) << text;
      const PromFamily* keys = p.Find("pstrain_server_table_keys_total");
      ASSERT_NE(keys, nullptr) << text;
      EXPECT_FALSE(keys->samples.empty());
      EXPECT_NE(p.Find("pstrain_server_table_memory_bytes"), nullptr);
      EXPECT_NE(p.Find("pstrain_server_clock_lead"), nullptr);
      // Pull and push latency histograms per table.
      const PromFamily* latency = p.Find("pstrain_server_table_request_seconds");
      ASSERT_NE(latency, nullptr) << text;
      double pulls = 0, pushes = 0;
      for (const PromSample& s : latency->samples) {
        if (s.name != "pstrain_server_table_request_seconds_count" || !s.labels.count("table")) continue;
        (s.labels.at("op") == "pull" ? pulls : pushes) += s.value;
      }
      EXPECT_GT(pulls, 0) << text;
      EXPECT_GT(pushes, 0) << text;
    } else if (who.rfind("worker", 0) == 0) {
      EXPECT_GT(p.Value("pstrain_worker_samples_total"), 0) << text;
      EXPECT_GT(p.Value("pstrain_worker_reader_rows_total"), 0) << text;
      EXPECT_NE(p.Find("pstrain_worker_train_loss"), nullptr);
    } else {
      for (const char* role_rank : {"server/0", "server/1", "worker/0", "worker/1"}) {
        std::string s(role_rank);
        double age = p.Value("pstrain_coordinator_heartbeat_age_seconds",
                             {{"role", s.substr(0, s.find('/'))}, {"rank", s.substr(s.find('/') + 1)}});
        EXPECT_GE(age, 0) << role_rank << "\n" << text;
        EXPECT_LT(age, 5) << role_rank;
      }
      EXPECT_GT(p.Value("pstrain_coordinator_heartbeats_total"), 0);
    }
  }
  launcher.Signal(SIGTERM);
  EXPECT_NE(launcher.Wait(absl::Seconds(30)), -1) << launcher.Log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
