// The metrics registry: cells, families, histograms, scrape hooks and the
// exposition text they render to.
#include "common/metrics/registry.h"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "common/metrics/process_metrics.h"

namespace pstrain::metrics {
namespace {

TEST(MetricsRegistry, CounterAndGaugeRenderWithHelpAndType) {
  Registry r;
  r.GetCounter("jobs_total", "Jobs done.")->Inc(3);
  r.GetGauge("temperature", "Now.")->Set(-1.5);
  std::string text = r.Render();
  EXPECT_NE(text.find("# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\njobs_total 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE temperature gauge\ntemperature -1.5\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, RegisteringTheSameNameTwiceReturnsTheSameCells) {
  Registry r;
  Counter* a = r.AddCounter("x_total", "x", {"op"})->Get({"pull"});
  Counter* b = r.AddCounter("x_total", "x", {"op"})->Get({"pull"});
  EXPECT_EQ(a, b);
  a->Inc();
  b->Inc();
  EXPECT_EQ(a->value(), 2);
}

TEST(MetricsRegistry, LabelValuesAreEscaped) {
  Registry r;
  r.AddGauge("g", "help with \\ and\nnewline", {"name"})->Get({"a\"b\\c\nd"})->Set(1);
  std::string text = r.Render();
  EXPECT_NE(text.find("# HELP g help with \\\\ and\\nnewline\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{name=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeAndEndWithInf) {
  Registry r;
  Histogram* h = r.AddHistogram("lat_seconds", "Latency.", {"op"}, {0.1, 1})->Get({"pull"});
  h->Observe(0.05);
  h->Observe(0.1);  // on the bound: counted in le="0.1"
  h->Observe(0.5);
  h->Observe(7);
  Histogram::Snapshot s = h->Read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 7.65);
  std::string text = r.Render();
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"pull\",le=\"0.1\"} 2\n"
                      "lat_seconds_bucket{op=\"pull\",le=\"1\"} 3\n"
                      "lat_seconds_bucket{op=\"pull\",le=\"+Inf\"} 4\n"
                      "lat_seconds_sum{op=\"pull\"} 7.65\n"
                      "lat_seconds_count{op=\"pull\"} 4\n"),
            std::string::npos)
      << text;
}

TEST(MetricsRegistry, ValuesAreFormattedAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(5e-05), "5e-05");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
  EXPECT_EQ(std::strtod(FormatValue(0.1 + 0.2).c_str(), nullptr), 0.1 + 0.2);
}

TEST(MetricsRegistry, ScrapeHooksRunBeforeRendering) {
  Registry r;
  Gauge* g = r.GetGauge("hooked", "Set by a hook.");
  int calls = 0;
  r.AddScrapeHook([&] { g->Set(++calls); });
  EXPECT_NE(r.Render().find("hooked 1\n"), std::string::npos);
  EXPECT_NE(r.Render().find("hooked 2\n"), std::string::npos);
}

TEST(MetricsRegistry, ConcurrentIncrementsAreNotLost) {
  Registry r;
  Counter* c = r.GetCounter("c_total", "c");
  Histogram* h = r.AddHistogram("h", "h", {}, {1})->Get({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Inc();
        h->Observe(0.5);
      }
    });
  }
  std::thread scraper([&] {
    for (int i = 0; i < 20; ++i) r.Render();
  });
  for (auto& t : threads) t.join();
  scraper.join();
  EXPECT_EQ(c->value(), 40000);
  EXPECT_EQ(h->Read().count, 40000u);
}

TEST(MetricsRegistry, ProcessMetricsReportThisProcess) {
  Registry r;
  RegisterProcessMetrics(&r);
  std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos);
  ProcessUsage u = ReadProcessUsage();
  EXPECT_GT(u.resident_bytes, 1u << 20);
  EXPECT_GE(u.virtual_bytes, u.resident_bytes);
  EXPECT_GT(u.cpu_seconds, 0);
}

// What an update costs on the hot path (a budget, not a benchmark: it
// fails only when something is badly wrong, e.g. a lock crept in).
TEST(MetricsRegistry, UpdatesCostLessThanAMicrosecond) {
  Registry r;
  Counter* c = r.GetCounter("fast_total", "fast");
  Histogram* h = r.AddHistogram("fast_seconds", "fast", {}, LatencyBuckets())->Get({});
  constexpr int kN = 200000;
  int64_t t0 = MonotonicNanos();
  for (int i = 0; i < kN; ++i) {
    c->Inc(64);
    h->Observe(i * 1e-7);
  }
  double ns = static_cast<double>(MonotonicNanos() - t0) / kN;
  EXPECT_LT(ns, 1000) << ns << " ns per counter add + histogram observation";
  RecordProperty("ns_per_update", std::to_string(ns));
}

}  // namespace
}  // namespace pstrain::metrics
