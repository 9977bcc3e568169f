#include "launcher/plan_scale.h"

#include <gtest/gtest.h>

#include "launcher/plan_hosts.h"

namespace pstrain::launcher {
namespace {

ScaleInputs Dlrm(int workers, int servers) {
  ScaleInputs in;
  in.model.name = "dlrm";  // 26 lookups of dim 16, 27 601 dense floats
  in.batch_size = 1024;
  in.workers = workers;
  in.servers = servers;
  in.host_cpus = 0.12;
  in.link_bytes_per_sec = 10e9 / 8;
  in.unique_per_sample = 7.62;
  in.speeds.worker_cpu_per_sample = 6e-6;
  in.speeds.server_cpu_per_sample = 3.5e-6;
  return in;
}

TEST(PlanScale, WireBytesFollowTheFormula) {
  // u (8 + 8 + 4d) + 4P/B + 2 S h / B sent, u 4d + 4P/B + 2 S h / B received.
  const std::vector<int> dims(26, 16);
  const WireBytes one = PsWireBytes(27601, dims, 7.62, 1024, 1);
  const double dense = 4.0 * 27601 / 1024, headers = 2 * kMessageOverheadBytes / 1024;
  EXPECT_NEAR(one.sent, 7.62 * 80 + dense + headers, 1e-9);
  EXPECT_NEAR(one.received, 7.62 * 64 + dense + headers, 1e-9);
  // Measured at W = 1, S = 1 (bench/results/2026-12-03-scale.md): 719.8 / 595.7.
  EXPECT_NEAR(one.sent, 719.8, 0.03 * 719.8);
  EXPECT_NEAR(one.received, 595.7, 0.03 * 595.7);
  // More servers: more messages, the same payload.
  const WireBytes four = PsWireBytes(27601, dims, 7.62, 1024, 4);
  EXPECT_NEAR(four.sent - one.sent, 3 * headers, 1e-9);
}

TEST(PlanScale, TheSmallestBoundWinsAndIsNamed) {
  auto one = PredictScale(Dlrm(1, 1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->bottleneck, "worker CPU");
  EXPECT_NEAR(one->samples_per_sec, 0.12 / 6e-6, 1);
  EXPECT_NEAR(one->efficiency, 1.0, 1e-9);
  EXPECT_NEAR(one->unique_per_sample, 7.62, 1e-12);

  // Two workers on one server: the server (3.5 us a sample, 7 for both)
  // saturates first.
  auto two = PredictScale(Dlrm(2, 1));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->bottleneck, "server CPU");
  EXPECT_NEAR(two->samples_per_sec, 0.12 / 3.5e-6, 1);
  EXPECT_NEAR(two->efficiency, (0.12 / 3.5e-6) / (2 * 0.12 / 6e-6), 1e-9);

  // A slow link takes over.
  ScaleInputs slow = Dlrm(8, 4);
  slow.link_bytes_per_sec = 10e6 / 8;  // 10 Mbit/s
  auto s = PredictScale(slow);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bottleneck, "server link");  // 4 server links carry 8 workers' bytes
  EXPECT_NEAR(s->samples_per_sec, 4 * slow.link_bytes_per_sec / s->worker_bytes.sent, 1e-6);
}

TEST(PlanScale, EachExtraServerCostsTheWorkersCpu) {
  ScaleInputs in = Dlrm(8, 8);
  auto free = PredictScale(in);
  in.speeds.worker_cpu_per_server = 0.2e-6;
  auto costly = PredictScale(in);
  ASSERT_TRUE(free.ok() && costly.ok());
  EXPECT_EQ(free->bottleneck, "worker CPU");
  EXPECT_NEAR(costly->worker_cpu_bound, 8 * 0.12 / (6e-6 + 7 * 0.2e-6), 1e-6);
  EXPECT_LT(costly->samples_per_sec, free->samples_per_sec);
}

TEST(PlanScale, RefusesMissingSpeedsAndBadLayouts) {
  ScaleInputs in = Dlrm(2, 1);
  in.speeds.worker_cpu_per_sample = 0;
  auto none = PredictScale(in);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--calibration"), std::string::npos);
  in = Dlrm(0, 1);
  EXPECT_FALSE(PredictScale(in).ok());
  in = Dlrm(1, 1);
  in.model.name = "no_such_model";
  EXPECT_FALSE(PredictScale(in).ok());
}

TEST(PlanScale, SpeedsComeFromTheOneHostLinesOfTheRate) {
  const std::string lines =
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"1gbit","workers":1,"servers":1,"host_cpu":0.12,"worker_cpu_us_per_sample":9,"server_cpu_us_per_sample":9})"
      "\n"
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"host_cpu":0.12,"worker_cpu_us_per_sample":7,"server_cpu_us_per_sample":4,"worker_cpu_of_quota":0.9,"bytes_per_sample":{"worker":{"sent":719.8,"received":595.7}},"window":{"worker_cpu_us_per_sample":6,"server_cpu_us_per_sample":3,"worker_cpu_of_quota":0.95}})"
      "\n\n"
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":2,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":6.5,"server_cpu_us_per_sample":2.5}})"
      "\n"
      // Second runs of both layouts: the worker slowed by drift (not taken),
      // the server not (taken).
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":2,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":8,"server_cpu_us_per_sample":2.5}})"
      "\n"
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":7.5,"server_cpu_us_per_sample":2.75}})"
      "\n"
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":8,"servers":4,"worker_cpu_us_per_sample":1})"
      "\n";
  auto s = SpeedsFromScaleLines(lines, "10gbit", "dlrm");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->worker_cpu_per_sample, 6e-6, 1e-12);  // the window's, not the lives'
  EXPECT_NEAR(s->server_cpu_per_sample, 2.75e-6, 1e-12);  // each role's least of its runs
  EXPECT_NEAR(s->busy_fraction, 0.95, 1e-12);
  // A one-host run with 2 servers: its worker's extra CPU is the cost of a
  // second server; its servers' (overstated) is not taken.
  EXPECT_NEAR(s->worker_cpu_per_server, 0.5e-6, 1e-12);
  EXPECT_EQ(s->server_cpu_per_server, 0);
  EXPECT_NEAR(s->worker_received, 595.7, 1e-9);

  // u solved from the measured bytes: about 7.6 distinct ids a sample.
  ScaleInputs in = Dlrm(1, 1);
  in.unique_per_sample = -1;
  in.speeds = *s;
  auto p = PredictScale(in);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->unique_per_sample, 7.6, 0.2);

  auto other = SpeedsFromScaleLines(lines, "1gbit", "dlrm");
  ASSERT_TRUE(other.ok());
  EXPECT_NEAR(other->worker_cpu_per_sample, 9e-6, 1e-12);
  EXPECT_EQ(other->worker_cpu_per_server, 0);  // no 2-server line at 1gbit

  auto missing = SpeedsFromScaleLines(lines, "100mbit", "dlrm");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--calibrate"), std::string::npos);
  auto garbage = SpeedsFromScaleLines("{\"bench\":\"scale\"}\nnot json\n", "", "");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("line 2"), std::string::npos);
}

TEST(PlanScale, AllreduceSendsTheDenseGradientsRoundTheWorkersNotToTheServers) {
  const double dense = 4.0 * 27601 / 1024;
  EXPECT_EQ(RingBytes(27601, 1024, 1), 0);
  EXPECT_NEAR(RingBytes(27601, 1024, 2), dense, 1e-9);
  EXPECT_NEAR(RingBytes(27601, 1024, 8), 1.75 * dense, 1e-9);

  ScaleInputs in = Dlrm(8, 4);
  in.allreduce = true;
  in.speeds.worker_cpu_per_ring = 0.4e-6;
  auto p = PredictScale(in);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<int> dims(26, 16);
  const WireBytes sparse = PsWireBytes(0, dims, 7.62, 1024, 4);
  EXPECT_NEAR(p->ring_bytes, 1.75 * dense, 1e-9);
  EXPECT_NEAR(p->worker_bytes.sent, sparse.sent + 1.75 * dense, 1e-9);
  EXPECT_NEAR(p->worker_bytes.received, sparse.received + 1.75 * dense, 1e-9);
  // The servers carry only the sparse traffic.
  EXPECT_NEAR(p->server_link_bound, 4 * in.link_bytes_per_sec / sparse.sent, 1e-6);
  // A worker pays for every step of the collective: bcube's 3 at W = 8.
  EXPECT_NEAR(p->worker_cpu_bound, 8 * 0.12 / (6e-6 + 3 * 0.4e-6), 1e-6);
  EXPECT_EQ(p->bottleneck, "worker CPU");
  // The ring's 7.
  in.ring = true;
  auto ring = PredictScale(in);
  ASSERT_TRUE(ring.ok());
  EXPECT_NEAR(ring->worker_cpu_bound, 8 * 0.12 / (6e-6 + 7 * 0.4e-6), 1e-6);
  EXPECT_NEAR(ring->ring_bytes, p->ring_bytes, 1e-12);  // the same bytes
  // Waiting for the slowest of 7 peers, 1 % of the time for each.
  in.ring = false;
  in.speeds.worker_wait_per_peer = 0.01;
  auto waits = PredictScale(in);
  ASSERT_TRUE(waits.ok());
  EXPECT_NEAR(waits->worker_cpu_bound, p->worker_cpu_bound * 0.93, 1e-6);
  EXPECT_NEAR(waits->server_cpu_bound, p->server_cpu_bound, 1e-6);  // servers do not wait
  // One host has no ring: the same as ps mode without the dense traffic.
  in.workers = in.servers = 1;
  auto one = PredictScale(in);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ring_bytes, 0);
  EXPECT_NEAR(one->worker_cpu_bound, 0.12 / 6e-6, 1e-6);
  EXPECT_NEAR(one->efficiency, 1.0, 1e-9);
}

TEST(PlanScale, AllreduceStepsAreTheRingsLengthOrBcubesGroups) {
  EXPECT_EQ(AllreduceSteps(1, false), 0);
  EXPECT_EQ(AllreduceSteps(2, false), 1);
  EXPECT_EQ(AllreduceSteps(4, false), 2);
  EXPECT_EQ(AllreduceSteps(8, false), 3);
  EXPECT_EQ(AllreduceSteps(6, false), 3);   // a group of 2, then one of 3
  EXPECT_EQ(AllreduceSteps(5, false), 4);   // one group of 5
  EXPECT_EQ(AllreduceSteps(12, false), 4);  // 2, 2, 3
  EXPECT_EQ(AllreduceSteps(1, true), 0);
  EXPECT_EQ(AllreduceSteps(8, true), 7);
}

TEST(PlanScale, AllreduceSpeedsComeFromItsOwnLinesAndItsRings) {
  const std::string lines =
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":9,"server_cpu_us_per_sample":9}})"
      "\n"
      R"({"bench":"scale","mode":"allreduce","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":5,"server_cpu_us_per_sample":2.5}})"
      "\n"
      R"({"bench":"scale","mode":"allreduce","model":"dlrm","rate":"10gbit","workers":2,"servers":1,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":5.6,"server_cpu_us_per_sample":2.4}})"
      "\n"
      R"({"bench":"scale","mode":"allreduce","model":"dlrm","rate":"10gbit","workers":2,"servers":1,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":5.4,"server_cpu_us_per_sample":2.4}})"
      "\n";
  auto s = SpeedsFromScaleLines(lines, "10gbit", "dlrm", TrainMode::kAllreduce);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->worker_cpu_per_sample, 5e-6, 1e-12);   // not the ps line's
  EXPECT_NEAR(s->server_cpu_per_sample, 2.5e-6, 1e-12);  // the one-host runs' only
  EXPECT_NEAR(s->worker_cpu_per_ring, 0.4e-6, 1e-12);   // the cheaper two-worker run
  // With four workers (bcube: 2 steps, 2 us more): the least-squares slope
  // over the steps, (1 x 0.4 + 2 x 2) / (1 + 4).
  const std::string four =
      lines +
      R"({"bench":"scale","mode":"allreduce","model":"dlrm","rate":"10gbit","workers":4,"servers":2,"host_cpu":0.12,"window":{"worker_cpu_us_per_sample":7,"server_cpu_us_per_sample":2,"worker_cpu_of_quota":0.9}})"
      "\n";
  auto fit = SpeedsFromScaleLines(four, "10gbit", "dlrm", TrainMode::kAllreduce);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->worker_cpu_per_ring, 0.88e-6, 1e-12);
  // Busy 0.9 of the quota with 3 peers, against the one-host run's eta
  // (no quota in its line: 1): 0.1 idle over 3 peers, and none over the
  // 2-worker runs' one (no quota either): (3 x 0.1) / (1 + 9).
  EXPECT_NEAR(fit->worker_wait_per_peer, 0.03, 1e-12);
  EXPECT_NEAR(fit->worker_cpu_per_sample, 5e-6, 1e-12);  // still the one-host runs'
  // The same run with the ring (its model_flags say so): 3 steps, (0.4 + 3 x 2) / (1 + 9).
  std::string ring_four = four;
  ring_four.insert(ring_four.find("\"host_cpu\":0.12,\"window\":{\"worker_cpu_us_per_sample\":7"),
                   "\"model_flags\":\"--allreduce_algorithm=ring\",");
  auto ring_fit = SpeedsFromScaleLines(ring_four, "10gbit", "dlrm", TrainMode::kAllreduce);
  ASSERT_TRUE(ring_fit.ok()) << ring_fit.status();
  EXPECT_NEAR(ring_fit->worker_cpu_per_ring, 0.64e-6, 1e-12);
  auto ps = SpeedsFromScaleLines(lines, "10gbit", "dlrm", TrainMode::kPs);
  ASSERT_TRUE(ps.ok());
  EXPECT_NEAR(ps->worker_cpu_per_sample, 9e-6, 1e-12);
  EXPECT_EQ(ps->worker_cpu_per_ring, 0);

  // Without a two-worker run the ring's cost is unknown: refused, saying how to measure it.
  const std::string one_host = lines.substr(0, lines.find("\n", lines.find("allreduce")) + 1);
  auto missing = SpeedsFromScaleLines(one_host, "10gbit", "dlrm", TrainMode::kAllreduce);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--calibrate --mode=allreduce"), std::string::npos);
}

TEST(PlanScale, AFileWithCalibrationRunsLearnsFromThemOnly) {
  // A sweep's file: its calibration run, then a point it measured (cheaper
  // here) that the plan is to predict, not learn from.
  const std::string lines =
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"calibration":true,"window":{"worker_cpu_us_per_sample":6,"server_cpu_us_per_sample":3}})"
      "\n"
      R"({"bench":"scale","mode":"ps","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"window":{"worker_cpu_us_per_sample":4,"server_cpu_us_per_sample":2}})"
      "\n";
  auto s = SpeedsFromScaleLines(lines, "10gbit", "dlrm");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->worker_cpu_per_sample, 6e-6, 1e-12);
  EXPECT_NEAR(s->server_cpu_per_sample, 3e-6, 1e-12);
  // Without any marked run, every line counts (the cheapest).
  auto unmarked = SpeedsFromScaleLines(lines.substr(lines.find('\n') + 1), "10gbit", "dlrm");
  ASSERT_TRUE(unmarked.ok());
  EXPECT_NEAR(unmarked->worker_cpu_per_sample, 4e-6, 1e-12);
}

TEST(PlanScale, BspWorkersLoseTheBarriersWaitFromTheirOwnRuns) {
  const std::string lines =
      R"({"bench":"scale","mode":"ps","consistency":"asp","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"window":{"worker_cpu_us_per_sample":4,"server_cpu_us_per_sample":2,"worker_cpu_of_quota":1.0}})"
      "\n"
      R"({"bench":"scale","mode":"ps","consistency":"bsp","model":"dlrm","rate":"10gbit","workers":1,"servers":1,"window":{"worker_cpu_us_per_sample":5,"server_cpu_us_per_sample":2.5,"worker_cpu_of_quota":1.0}})"
      "\n"
      R"({"bench":"scale","mode":"ps","consistency":"bsp","model":"dlrm","rate":"10gbit","workers":2,"servers":1,"window":{"worker_cpu_us_per_sample":5,"server_cpu_us_per_sample":2.5,"worker_cpu_of_quota":0.96}})"
      "\n"
      R"({"bench":"scale","mode":"ps","consistency":"bsp","model":"dlrm","rate":"10gbit","workers":4,"servers":2,"window":{"worker_cpu_us_per_sample":5,"server_cpu_us_per_sample":2.5,"worker_cpu_of_quota":0.94}})"
      "\n";
  auto bsp = SpeedsFromScaleLines(lines, "10gbit", "dlrm", TrainMode::kPs, "bsp");
  ASSERT_TRUE(bsp.ok()) << bsp.status();
  EXPECT_NEAR(bsp->worker_cpu_per_sample, 5e-6, 1e-12);  // the BSP run's, not the ASP one's
  EXPECT_EQ(bsp->worker_cpu_per_ring, 0);                // no collective
  // The wait grows with log2 W: fitted over 1 and 2 doublings.
  EXPECT_NEAR(bsp->worker_wait_per_doubling, (1 * 0.04 + 2 * 0.06) / 5, 1e-12);
  EXPECT_EQ(bsp->worker_wait_per_peer, 0);  // allreduce's
  ScaleInputs in = Dlrm(8, 4);
  in.speeds = *bsp;
  auto asp_like = PredictScale(in);
  in.synchronous = true;
  auto p = PredictScale(in);
  ASSERT_TRUE(asp_like.ok() && p.ok());
  EXPECT_NEAR(p->worker_cpu_bound, asp_like->worker_cpu_bound * (1 - 3 * 0.032), 1e-6);
  in.workers = 2;
  auto two = PredictScale(in);
  in.synchronous = false;
  auto two_asp = PredictScale(in);
  ASSERT_TRUE(two.ok() && two_asp.ok());
  EXPECT_NEAR(two->worker_cpu_bound, two_asp->worker_cpu_bound * (1 - 0.032), 1e-6);
  // ASP ignores them; BSP without runs of 2 or more workers is predicted as ASP.
  auto asp = SpeedsFromScaleLines(lines, "10gbit", "dlrm", TrainMode::kPs, "asp");
  ASSERT_TRUE(asp.ok());
  EXPECT_NEAR(asp->worker_cpu_per_sample, 4e-6, 1e-12);
  EXPECT_EQ(asp->worker_wait_per_doubling, 0);
  const std::string one_host = lines.substr(0, lines.rfind('\n', lines.find("\"workers\":2")) + 1);
  auto alone = SpeedsFromScaleLines(one_host, "10gbit", "dlrm", TrainMode::kPs, "bsp");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->worker_wait_per_doubling, 0);
}

TEST(PlanScale, TheDriftAllowanceLowersThePredictionNotTheBounds) {
  ScaleInputs in = Dlrm(4, 2);
  in.speeds.worker_cpu_per_sample = 6e-6;
  in.speeds.server_cpu_per_sample = 2e-6;
  auto undrifted = PredictScale(in);
  in.drift_allowance = 0.1;
  auto p = PredictScale(in);
  ASSERT_TRUE(undrifted.ok() && p.ok());
  EXPECT_NEAR(p->undrifted_samples_per_sec, undrifted->samples_per_sec, 1e-9);
  EXPECT_NEAR(p->samples_per_sec, 0.9 * undrifted->samples_per_sec, 1e-6);
  EXPECT_NEAR(p->worker_cpu_bound, undrifted->worker_cpu_bound, 1e-9);
  EXPECT_EQ(p->bottleneck, undrifted->bottleneck);
  EXPECT_NEAR(p->efficiency, undrifted->efficiency, 1e-12);  // both rates lowered alike
  in.drift_allowance = 1;
  auto bad = PredictScale(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--drift_allowance"), std::string::npos);
}

TEST(PlanScale, LinkRatesTakeUnits) {
  EXPECT_DOUBLE_EQ(*ParseLinkRate("10gbit"), 1.25e9);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1Gbit"), 1.25e8);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("100mbit"), 1.25e7);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1.5"), 1.5e9);
  auto bad = ParseLinkRate("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--bandwidth=fast"), std::string::npos);
  EXPECT_FALSE(ParseLinkRate("-1gbit").ok());
}

}  // namespace
}  // namespace pstrain::launcher
