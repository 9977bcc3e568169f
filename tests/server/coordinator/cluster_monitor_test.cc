// The coordinator's cluster monitor: membership and health, heartbeat
// numbers and their series, checkpoints, and its metrics.
#include "server/coordinator/dashboard/cluster_monitor.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/common/prometheus_text.h"

namespace pstrain::server {
namespace {

using nlohmann::json;

proto::NodeInfo Info(proto::Role role, int rank) {
  proto::NodeInfo n;
  n.role = role;
  n.rank = rank;
  n.endpoint = "tcp://127.0.0.1:" + std::to_string(9000 + rank);
  n.host = "hostx";
  n.pid = 100 + rank;
  return n;
}

const json* FindNode(const json& state, const std::string& role, int rank) {
  for (const json& n : state["nodes"]) {
    if (n["role"] == role && n["rank"] == rank) return &n;
  }
  return nullptr;
}

TEST(ClusterMonitor, ListsEveryExpectedNodeWithItsStateAndNumbers) {
  ClusterMonitorOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  ClusterMonitor m(o, nullptr);
  m.OnJoin(Info(proto::Role::kServer, 0));
  m.OnJoin(Info(proto::Role::kWorker, 0));
  proto::Heartbeat hb;
  hb.step = 10;
  hb.samples = 10240;
  hb.samples_per_sec = 5000;
  hb.loss = 0.5;
  hb.rss_bytes = 50 << 20;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  json s = json::parse(m.StateJson());
  EXPECT_EQ(s["job"]["state"], "starting");  // worker 1 has not joined
  ASSERT_EQ(s["nodes"].size(), 4u);          // coordinator, 1 server, 2 workers
  EXPECT_EQ((*FindNode(s, "coordinator", 0))["state"], "alive");
  EXPECT_EQ((*FindNode(s, "server", 0))["state"], "alive");
  EXPECT_EQ((*FindNode(s, "server", 0))["pid"], 100);
  const json& w0 = *FindNode(s, "worker", 0);
  EXPECT_EQ(w0["state"], "alive");
  EXPECT_EQ(w0["step"], 10);
  EXPECT_EQ(w0["loss"], 0.5);
  EXPECT_EQ(w0["rss_bytes"], 50 << 20);
  EXPECT_LT(w0["heartbeat_age"].get<double>(), 5);
  EXPECT_EQ((*FindNode(s, "worker", 1))["state"], "waiting");
  EXPECT_TRUE((*FindNode(s, "worker", 1))["heartbeat_age"].is_null());
  ASSERT_EQ(s["series"]["loss"].size(), 1u);
  EXPECT_EQ(s["series"]["loss"][0]["name"], "worker 0");
  EXPECT_EQ(s["series"]["loss"][0]["v"][0], 0.5);

  m.OnJoin(Info(proto::Role::kWorker, 1));
  m.OnDead(proto::Role::kWorker, 1);
  m.OnWorkerDone(0);
  s = json::parse(m.StateJson());
  EXPECT_EQ(s["job"]["state"], "running");
  EXPECT_EQ((*FindNode(s, "worker", 1))["state"], "dead");
  EXPECT_EQ((*FindNode(s, "worker", 0))["state"], "done");
  m.OnJobEnd(absl::UnavailableError("worker 1 stopped responding"));
  s = json::parse(m.StateJson());
  EXPECT_EQ(s["job"]["state"], "failed");
  EXPECT_NE(s["job"]["message"].get<std::string>().find("worker 1"), std::string::npos);
}

TEST(ClusterMonitor, EvaluationsBecomeOnePointEach) {
  ClusterMonitorOptions o;
  o.num_servers = 1;
  o.num_workers = 1;
  ClusterMonitor m(o, nullptr);
  m.OnJoin(Info(proto::Role::kWorker, 0));
  proto::Heartbeat hb;
  for (int i = 0; i < 5; ++i) m.OnHeartbeat(proto::Role::kWorker, 0, hb);  // no eval yet
  hb.eval_step = 100;
  hb.eval_auc = 0.7;
  hb.eval_logloss = 0.5;
  for (int i = 0; i < 3; ++i) m.OnHeartbeat(proto::Role::kWorker, 0, hb);  // repeated
  hb.eval_step = 200;
  hb.eval_auc = 0.75;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  json s = json::parse(m.StateJson());
  EXPECT_EQ(s["series"]["eval_auc"][0]["v"], json::array({0.7, 0.75}));
}

// A model of several heads: a line per head with an AUC (a regression
// head has none), in place of the job's one line (the first head's).
TEST(ClusterMonitor, SeveralHeadsBecomeALinePerHead) {
  ClusterMonitorOptions o;
  o.num_workers = 1;
  ClusterMonitor m(o, nullptr);
  m.OnJoin(Info(proto::Role::kWorker, 0));
  proto::Heartbeat hb;
  hb.eval_step = 100;
  hb.eval_auc = 0.7;
  hb.eval_heads = {{"click", 0.7, 0.5}, {"convert", 0.6, 0.4}, {"spend", NAN, 3.0}};
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);  // the same evaluation: no new point
  hb.eval_step = 200;
  hb.eval_auc = 0.72;
  hb.eval_heads = {{"click", 0.72, 0.49}, {"convert", 0.65, 0.38}, {"spend", NAN, 2.0}};
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  json s = json::parse(m.StateJson());
  const json& auc = s["series"]["eval_auc"];
  ASSERT_EQ(auc.size(), 2u) << auc;
  EXPECT_EQ(auc[0]["name"], "click AUC");
  EXPECT_EQ(auc[0]["v"], json::array({0.7, 0.72}));
  EXPECT_EQ(auc[1]["name"], "convert AUC");
  EXPECT_EQ(auc[1]["v"], json::array({0.6, 0.65}));
  const json& logloss = s["series"]["eval_logloss"];
  ASSERT_EQ(logloss.size(), 2u) << logloss;
  EXPECT_EQ(logloss[1]["name"], "convert logloss");
  EXPECT_EQ(logloss[1]["v"], json::array({0.4, 0.38}));
}

TEST(ClusterMonitor, StreamPartitionsBecomeAProgressiveAucSeriesPerWorker) {
  ClusterMonitorOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  ClusterMonitor m(o, nullptr);
  m.OnJoin(Info(proto::Role::kWorker, 0));
  m.OnJoin(Info(proto::Role::kWorker, 1));
  proto::Heartbeat hb;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);  // no partition yet
  hb.partitions = 1;
  hb.partition_auc = 0.61;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);  // the same partition again
  hb.partitions = 2;
  hb.partition_auc = 0.66;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  m.OnHeartbeat(proto::Role::kWorker, 1, proto::Heartbeat{});  // a file job's worker: no series
  json s = json::parse(m.StateJson());
  const json& auc = s["series"]["eval_auc"];
  ASSERT_EQ(auc.size(), 2u) << auc;  // the evaluations, then worker 0's partitions
  EXPECT_EQ(auc[1]["name"], "worker 0 progressive AUC");
  ASSERT_EQ(auc[1]["v"].size(), 2u);
  EXPECT_NEAR(auc[1]["v"][0].get<double>(), 0.61, 1e-6);
  EXPECT_NEAR(auc[1]["v"][1].get<double>(), 0.66, 1e-6);
}

TEST(ClusterMonitor, LongSeriesAreThinnedAndCappedInTheJson) {
  ClusterMonitorOptions o;
  o.num_servers = 1;
  o.num_workers = 1;
  o.max_points = 100;
  ClusterMonitor m(o, nullptr);
  m.OnJoin(Info(proto::Role::kWorker, 0));
  proto::Heartbeat hb;
  for (int i = 0; i < 1000; ++i) {
    hb.loss = i;
    m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  }
  json s = json::parse(m.StateJson(30));
  const json& v = s["series"]["loss"][0]["v"];
  EXPECT_LE(v.size(), 31u);  // at most the cap, plus the newest point
  EXPECT_GE(v.size(), 15u);
  EXPECT_EQ(v.front(), 0);    // the start of the run is still there
  EXPECT_EQ(v.back(), 999);   // and so is the newest point
  // Evenly spaced: every gap but the last is the same.
  for (size_t i = 2; i + 1 < v.size(); ++i) {
    EXPECT_EQ(v[i].get<double>() - v[i - 1].get<double>(), v[1].get<double>() - v[0].get<double>());
  }
}

TEST(ClusterMonitor, CheckpointsAppearInTheStateAndTheMetrics) {
  metrics::Registry registry;
  ClusterMonitorOptions o;
  ClusterMonitor m(o, &registry);
  EXPECT_EQ(json::parse(m.StateJson())["checkpoints"].size(), 0u);
  CheckpointRecord c;
  c.step = 500;
  c.duration_seconds = 2.5;
  c.bytes = 1 << 20;
  c.path = "/ckpt/500/MANIFEST";
  m.AddCheckpoint(c);
  CheckpointRecord bad = c;
  bad.ok = false;
  bad.message = "disk full";
  m.AddCheckpoint(bad);
  json s = json::parse(m.StateJson());
  ASSERT_EQ(s["checkpoints"].size(), 2u);
  EXPECT_EQ(s["checkpoints"][0]["step"], 500);
  EXPECT_EQ(s["checkpoints"][1]["ok"], false);
  testing::PromText p = testing::ParsePrometheusText(registry.Render());
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("pstrain_checkpoints_total", {{"outcome", "ok"}}), 1);
  EXPECT_EQ(p.Value("pstrain_checkpoints_total", {{"outcome", "failed"}}), 1);
  EXPECT_EQ(p.Value("pstrain_checkpoint_last_step"), 500);
  EXPECT_EQ(p.Value("pstrain_checkpoint_duration_seconds_count"), 1);
}

TEST(ClusterMonitor, MetricsGiveHeartbeatAgesAndStepSpread) {
  metrics::Registry registry;
  ClusterMonitorOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  ClusterMonitor m(o, &registry);
  m.OnJoin(Info(proto::Role::kServer, 0));
  m.OnJoin(Info(proto::Role::kWorker, 0));
  m.OnJoin(Info(proto::Role::kWorker, 1));
  proto::Heartbeat hb;
  hb.step = 10;
  hb.samples_per_sec = 100;
  m.OnHeartbeat(proto::Role::kWorker, 0, hb);
  hb.step = 13;
  m.OnHeartbeat(proto::Role::kWorker, 1, hb);
  testing::PromText p = testing::ParsePrometheusText(registry.Render());
  ASSERT_EQ(p.error, "");
  double age = p.Value("pstrain_coordinator_heartbeat_age_seconds", {{"role", "worker"}, {"rank", "1"}});
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 5);
  EXPECT_EQ(p.Value("pstrain_coordinator_worker_step_spread"), 3);
  EXPECT_EQ(p.Value("pstrain_cluster_samples_per_second"), 200);
  EXPECT_EQ(p.Value("pstrain_coordinator_nodes", {{"role", "worker"}, {"state", "alive"}}), 2);
  EXPECT_EQ(p.Value("pstrain_coordinator_node_up", {{"role", "server"}, {"rank", "0"}}), 1);
}

}  // namespace
}  // namespace pstrain::server
