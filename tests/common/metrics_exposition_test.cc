// The /metrics text parses as the Prometheus exposition format: the
// registry's own output (all metric kinds, awkward labels) and what the
// HTTP endpoint serves; and the test parser rejects what a scraper would.
#include <httplib.h>

#include <gtest/gtest.h>

#include "common/metrics/metrics_http.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "tests/common/prometheus_text.h"

namespace pstrain::metrics {
namespace {

using testing::ParsePrometheusText;
using testing::PromText;

void Populate(Registry* r) {
  RegisterProcessMetrics(r);
  auto* bytes = r->AddCounter("pstrain_test_bytes_total", "Bytes by table.", {"table", "op"});
  bytes->Get({"emb.c7", "pull"})->Inc(1024);
  bytes->Get({"top.2.weight", "push"})->Inc(4096);
  bytes->Get({"quote\"back\\slash\nnewline", "pull"})->Inc(1);
  r->GetGauge("pstrain_test_loss", "A loss.")->Set(0.4567);
  r->GetGauge("pstrain_test_unknown", "Not known yet.")->Set(NAN);
  auto* h = r->AddHistogram("pstrain_test_seconds", "Latency.", {"op"}, LatencyBuckets());
  for (int i = 0; i < 1000; ++i) h->Get({"pull"})->Observe(i * 1e-4);
  h->Get({"push"})->Observe(20);  // beyond every bound: only +Inf
  h->Get({"idle"});               // no observation at all
}

TEST(MetricsExposition, RegistryOutputParsesWithEveryRuleKept) {
  Registry r;
  Populate(&r);
  PromText p = ParsePrometheusText(r.Render());
  ASSERT_EQ(p.error, "");
  ASSERT_NE(p.Find("pstrain_test_seconds"), nullptr);
  EXPECT_EQ(p.Find("pstrain_test_seconds")->type, "histogram");
  EXPECT_EQ(p.Find("pstrain_test_bytes_total")->type, "counter");
  EXPECT_EQ(p.Value("pstrain_test_bytes_total", {{"table", "emb.c7"}, {"op", "pull"}}), 1024);
  EXPECT_EQ(p.Value("pstrain_test_bytes_total",
                    {{"table", "quote\"back\\slash\nnewline"}, {"op", "pull"}}),
            1);
  EXPECT_EQ(p.Value("pstrain_test_seconds_count", {{"op", "pull"}}), 1000);
  EXPECT_EQ(p.Value("pstrain_test_seconds_bucket", {{"op", "push"}, {"le", "10"}}), 0);
  EXPECT_EQ(p.Value("pstrain_test_seconds_bucket", {{"op", "push"}, {"le", "+Inf"}}), 1);
  EXPECT_EQ(p.Value("pstrain_test_seconds_count", {{"op", "idle"}}), 0);
  EXPECT_TRUE(std::isnan(p.Value("pstrain_test_unknown")));
  EXPECT_GT(p.Value("process_resident_memory_bytes"), 0);
}

TEST(MetricsExposition, EndpointServesParsableTextWithItsContentType) {
  Registry r;
  Populate(&r);
  auto server = StartMetricsServer(&r, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  PromText p = ParsePrometheusText(res->body);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.Value("pstrain_test_loss"), 0.4567);
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->body, "ok\n");
}

TEST(MetricsExposition, APortThatIsTakenFailsWithUnavailable) {
  Registry r;
  auto first = StartMetricsServer(&r, "127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = StartMetricsServer(&r, "127.0.0.1", (*first)->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(PrometheusTextParser, RejectsWhatAScraperWould) {
  auto error = [](const std::string& text) { return ParsePrometheusText(text).error; };
  EXPECT_EQ(error("# TYPE a counter\na 1\n"), "");
  EXPECT_NE(error("# TYPE a counter\na -1\n"), "");                     // negative counter
  EXPECT_NE(error("# TYPE a gauge\na{x=\"1} 1\n"), "");                 // unterminated label
  EXPECT_NE(error("# TYPE a gauge\na one\n"), "");                      // bad value
  EXPECT_NE(error("# TYPE 1a gauge\n"), "");                            // bad name
  EXPECT_NE(error("# TYPE a gauge\na 1"), "");                          // no final newline
  EXPECT_NE(error("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n"), "");  // interleaved
  EXPECT_NE(error("# TYPE a gauge\na 1\n# TYPE a gauge\n"), "");        // TYPE after samples
  const std::string ok_hist =
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
  EXPECT_EQ(error(ok_hist), "");
  EXPECT_NE(error("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\n"
                  "h_count 2\n"),
            "");  // decreasing
  EXPECT_NE(error("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\n"
                  "h_count 5\n"),
            "");  // +Inf != count
  EXPECT_NE(error("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 3\nh_count 1\n"), "");  // no +Inf
}

}  // namespace
}  // namespace pstrain::metrics
