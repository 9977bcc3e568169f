// pstrain dashboard --job_dir: a job's folder after the job, its state for
// the dashboard page, and the command serving them.
#include "launcher/finished_job.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/job_dir.h"

namespace pstrain::launcher {
namespace {

namespace fs = std::filesystem;

const char kMetrics[] =
    R"({"event":"progress","step":10,"loss":0.6,"samples_per_sec":5000,"elapsed_seconds":2})"
    "\n"
    R"({"event":"eval","step":10,"eval_auc":0.70,"eval_logloss":0.52,"eval_ne":0.95,"elapsed_seconds":2.1})"
    "\n"
    R"({"event":"progress","step":20,"loss":0.5,"samples_per_sec":5100,"elapsed_seconds":4})"
    "\n"
    R"({"event":"eval","step":20,"eval_auc":0.72,"eval_logloss":0.50,"eval_ne":0.93,"elapsed_seconds":4.1})"
    "\n"
    R"({"event":"summary","model":"dlrm","workers":2,"steps":20,"eval_auc":0.72,"samples_per_sec":5050,"wall_seconds":4.5})"
    "\n";

// A job folder: metrics.jsonl and a checkpoint folder with a manifest.
std::string MakeJobDir(const std::string& name, bool with_checkpoint = true) {
  const std::string dir = ::testing::TempDir() + "/finished_job_test/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/metrics.jsonl") << kMetrics;
  if (with_checkpoint) {
    fs::create_directories(dir + "/ckpt/ckpt-000000020");
    std::ofstream(dir + "/ckpt/ckpt-000000020/manifest.json")
        << R"({"format":"pstrain-checkpoint","version":1,"step":20,"time":"2026-12-06T00:00:00Z",)"
        << R"("num_servers":1,"num_workers":2,"tables":[],)"
        << R"("shards":[{"rank":0,"file":"server-0.shard","bytes":1234,"checksum":"x"}],)"
        << R"("workers":[]})";
    std::ofstream(dir + "/ckpt/ckpt-000000020/server-0.shard") << std::string(1234, 'x');
    fs::create_directories(dir + "/ckpt/ckpt-000000030");  // no manifest: unfinished
  }
  return dir;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(JobDir, FindsTheMetricsFileOrSaysWhatIsMissing) {
  const std::string dir = MakeJobDir("find");
  EXPECT_EQ(*FindMetricsFile(dir), dir + "/metrics.jsonl");
  fs::rename(dir + "/metrics.jsonl", dir + "/run-7.jsonl");
  EXPECT_EQ(*FindMetricsFile(dir), dir + "/run-7.jsonl");  // the one *.jsonl with records
  std::ofstream(dir + "/other.jsonl") << kMetrics;
  auto two = FindMetricsFile(dir);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("--metrics=FILE"), std::string::npos);
  auto none = FindMetricsFile(dir + "/nope");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("--job_dir=" + dir + "/nope"), std::string::npos);
}

TEST(JobDir, ListsTheCheckpointsWithAManifestOnly) {
  const std::vector<JobCheckpoint> c = FindCheckpoints(MakeJobDir("ckpt"));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].step, 20);
  EXPECT_EQ(c[0].bytes, 1234u);
  EXPECT_GT(c[0].time_unix, 1.6e9);
}

TEST(FinishedJob, StateHasTheLiveDashboardsShapeWithCurvesOverSteps) {
  const std::string dir = MakeJobDir("state");
  auto runs = ReadRunCurves(dir + "/metrics.jsonl", "metrics", nullptr);
  ASSERT_TRUE(runs.ok());
  auto s = nlohmann::json::parse(
      FinishedJobStateJson(*runs, FindCheckpoints(dir), dir + "/metrics.jsonl", 600));
  EXPECT_EQ(s["job"]["state"], "finished");
  EXPECT_EQ(s["job"]["workers"], 2);
  EXPECT_EQ(s["x_label"], "step");
  EXPECT_EQ(s["summary"]["model"], "dlrm");
  EXPECT_TRUE(s["nodes"].empty());
  EXPECT_EQ(s["series"]["loss"][0]["t"], nlohmann::json({10, 20}));
  EXPECT_EQ(s["series"]["loss"][0]["v"], nlohmann::json({0.6, 0.5}));
  EXPECT_EQ(s["series"]["eval_auc"][0]["v"], nlohmann::json({0.70, 0.72}));
  EXPECT_EQ(s["series"]["eval_ne"][0]["v"], nlohmann::json({0.95, 0.93}));
  EXPECT_FALSE(s["series"].contains("eval_calibration"));  // not in this file
  EXPECT_TRUE(s["series"]["rss_mib"].empty());
  ASSERT_EQ(s["checkpoints"].size(), 1u);
  EXPECT_EQ(s["checkpoints"][0]["step"], 20);
  EXPECT_DOUBLE_EQ(s["now"].get<double>(), 4.5);
}

// A model of several heads: the AUC and logloss charts have a line per
// head with an AUC (not the regression head).
TEST(FinishedJob, SeveralHeadsGiveALinePerHead) {
  RunCurves r;
  r.name = "r";
  r.eval_step = {10, 20};
  r.eval_auc = {0.6, 0.7};
  r.eval_logloss = {0.5, 0.45};
  r.heads = {{"click", {0.6, 0.7}, {0.5, 0.45}}, {"spend", {NAN, NAN}, {3, 2}},
             {"convert", {NAN, 0.62}, {NAN, 0.3}}};
  auto s = nlohmann::json::parse(FinishedJobStateJson({r}, {}, "m.jsonl", 600));
  const nlohmann::json& auc = s["series"]["eval_auc"];
  ASSERT_EQ(auc.size(), 2u) << auc;
  EXPECT_EQ(auc[0]["name"], "click AUC");
  EXPECT_EQ(auc[0]["v"], nlohmann::json({0.6, 0.7}));
  EXPECT_EQ(auc[1]["name"], "convert AUC");
  EXPECT_EQ(s["series"]["eval_logloss"][1]["name"], "convert logloss");
}

TEST(FinishedJob, AJobWithoutSummaryEndedAndSeriesAreThinned) {
  RunCurves r;
  r.name = "r";
  for (int i = 0; i < 1000; ++i) {
    r.step.push_back(i);
    r.loss.push_back(1.0 / (i + 1));
    r.samples_per_sec.push_back(100);
    r.elapsed.push_back(i);
  }
  auto s = nlohmann::json::parse(FinishedJobStateJson({r}, {}, "f.jsonl", 100));
  EXPECT_EQ(s["job"]["state"], "ended");
  const auto& t = s["series"]["loss"][0]["t"];
  EXPECT_LE(t.size(), 101u);
  EXPECT_EQ(t.back(), 999);  // the newest point kept
}

TEST(DashboardCommand, ServesTheDashboardPageAndTheJobsStateOn127001) {
  const std::string dir = MakeJobDir("serve");
  const int port = FreePort();
  absl::Status served;
  std::thread t([&] {
    served = RunDashboard({"--job_dir=" + dir, "--port=" + std::to_string(port),
                           "--serve_seconds=3"});
  });
  httplib::Client c("127.0.0.1", port);
  auto state = c.Get("/api/state");
  for (int i = 0; i < 50 && !state; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = c.Get("/api/state");
  }
  auto page = c.Get("/");
  auto script = c.Get("/dashboard.js");
  t.join();  // after --serve_seconds
  ASSERT_TRUE(state && page && script) << "no answer on port " << port;
  EXPECT_EQ(state->status, 200);
  auto s = nlohmann::json::parse(state->body);
  EXPECT_EQ(s["source"], dir + "/metrics.jsonl");
  EXPECT_EQ(s["series"]["loss"][0]["v"].size(), 2u);
  EXPECT_NE(page->body.find("dashboard.js"), std::string::npos);  // the live dashboard's page
  EXPECT_NE(script->body.find("renderFinishedJob"), std::string::npos);
  EXPECT_TRUE(served.ok()) << served;
}

TEST(DashboardCommand, BadFoldersAndFilesAreUsageErrorsNamingThem) {
  absl::Status st = RunDashboard({"--job_dir=/nonexistent/job"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find("/nonexistent/job"), std::string::npos);
  const std::string dir = MakeJobDir("bad", false);
  std::ofstream(dir + "/metrics.jsonl") << kMetrics << "{broken\n" << kMetrics;
  st = RunDashboard({"--job_dir=" + dir});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find(dir + "/metrics.jsonl:6:"), std::string::npos) << st;
  EXPECT_EQ(ExitCodeOf(RunDashboard({})), 2);
}

}  // namespace
}  // namespace pstrain::launcher
