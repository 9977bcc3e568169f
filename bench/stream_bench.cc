#include "bench/stream_bench.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/sparse_bench.h"
#include "common/hash.h"
#include "common/metrics/process_metrics.h"
#include "common/status.h"
#include "data/zipf.h"

namespace pstrain::bench {
namespace {

struct RunResult {
  uint64_t distinct_ids = 0;  // fresh ids streamed
  uint64_t max_rss = 0;
  uint64_t rows = 0, evicted = 0;
  double seconds = 0;
  bool stopped_past_budget = false;
};

struct Sample {
  uint64_t rows = 0, bytes = 0, evicted = 0;
};

absl::StatusOr<Sample> TableSample(BenchCluster& cluster) {
  PS_ASSIGN_OR_RETURN(std::vector<server::TableStats> stats,
                      cluster.server(0).StoreStats(absl::Seconds(30)));
  Sample s;
  for (const server::TableStats& t : stats) {
    if (!t.sparse) continue;
    s.rows += t.rows;
    s.bytes += t.bytes;
    s.evicted += t.evicted_capacity + t.evicted_ttl;
  }
  return s;
}

absl::StatusOr<RunResult> RunOne(const StreamBenchOptions& o, const StackOptions& stack,
                                 bool bounded) {
  const char* run = bounded ? "bounded" : "unbounded";
  BenchClusterOptions co;
  co.servers = 1;
  co.workers = 1;
  co.local_workers = 1;
  co.tables = SparseBenchTable(o.dim, o.dtype);
  if (bounded) {
    co.tables[0].eviction.max_rows = o.max_rows;
    co.tables[0].eviction.policy = o.policy == "lfu" ? EvictPolicy::kLfu : EvictPolicy::kLru;
  }
  co.stack = stack;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(co));
  worker::KvClient& kv = cluster->kv(0);

  worker::ZipfSampler zipf(o.hot_ids, o.zipf);
  std::mt19937_64 rng(11);
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const int fresh_per = std::max(1, static_cast<int>(o.ids * o.fresh_fraction));
  const int hot_per = std::max(0, o.ids - fresh_per);
  std::vector<uint64_t> ids, unique;
  std::vector<float> values;
  RunResult r;
  const auto start = Clock::now();
  double next_sample = 0;
  int64_t clock = 0;
  while (r.distinct_ids < o.distinct_ids) {
    ids.clear();
    // Hot ranks and fresh ids come from disjoint ranges, through the same
    // bijective mix, so neither ever collides with the other.
    for (int k = 0; k < hot_per; ++k) ids.push_back(Mix64(zipf.Sample(uniform)));
    for (int k = 0; k < fresh_per; ++k) ids.push_back(Mix64(o.hot_ids + 1 + r.distinct_ids++));
    unique = ids;
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    values.resize(ids.size() * o.dim);
    worker::PullHandle pl = kv.Pull({}, {worker::SparsePull{0, ids, values.data()}}, clock);
    PS_RETURN_IF_ERROR(pl.Wait().status());
    uint8_t* raw = nullptr;
    Buffer grads = Buffer::Allocate(unique.size() * o.dim * sizeof(float), &raw);
    float* g = reinterpret_cast<float*>(raw);
    for (size_t i = 0; i < unique.size() * o.dim; ++i) g[i] = 0.01f * float(i % 7) - 0.03f;
    worker::PushHandle ph = kv.Push({}, {worker::SparsePush{0, unique, std::move(grads)}},
                                    static_cast<uint32_t>(ids.size()), clock);
    PS_RETURN_IF_ERROR(ph.Wait());
    ++clock;
    const double t = SecondsSince(start);
    const bool last = r.distinct_ids >= o.distinct_ids;
    if (t < next_sample && !last) continue;
    next_sample = t + o.sample_seconds;
    const uint64_t rss = metrics::ReadProcessUsage().resident_bytes;
    r.max_rss = std::max(r.max_rss, rss);
    PS_ASSIGN_OR_RETURN(Sample s, TableSample(*cluster));
    JsonLine line;
    line.Add("bench", "sparse_stream")
        .Add("run", run)
        .Add("seconds", t)
        .Add("distinct_ids", r.distinct_ids)
        .Add("rss_bytes", rss)
        .Add("table_rows", s.rows)
        .Add("table_bytes", s.bytes)
        .Add("evicted", s.evicted);
    PrintResult(line);
    r.rows = s.rows;
    r.evicted = s.evicted;
    if (!bounded && rss > 2 * o.rss_budget_bytes) {
      r.stopped_past_budget = true;
      break;
    }
  }
  r.seconds = SecondsSince(start);
  PS_RETURN_IF_ERROR(cluster->Finish());
  return r;
}

}  // namespace

absl::Status RunStreamBench(const StreamBenchOptions& o, const StackOptions& stack) {
  if (o.ids < 2 || !(o.fresh_fraction > 0 && o.fresh_fraction <= 1) || o.hot_ids < 1 ||
      o.dim < 1 || o.max_rows < 1 || (o.policy != "lru" && o.policy != "lfu")) {
    return absl::InvalidArgumentError(
        "sparse_stream: want --ids >= 2, --fresh_fraction in (0, 1], --hot_ids >= 1, --dim >= 1, "
        "--max_rows >= 1 and --evict_policy lru or lfu");
  }
  const uint64_t baseline = metrics::ReadProcessUsage().resident_bytes;
  for (bool bounded : {true, false}) {
    if (!bounded && !o.unbounded) continue;
    PS_ASSIGN_OR_RETURN(RunResult r, RunOne(o, stack, bounded));
    JsonLine line;
    line.Add("bench", "sparse_stream")
        .Add("run", bounded ? "bounded" : "unbounded")
        .Add("summary", true)
        .Add("max_rows", bounded ? o.max_rows : uint64_t{0})
        .Add("policy", bounded ? o.policy : std::string("none"))
        .Add("dim", static_cast<int64_t>(o.dim))
        .Add("dtype", RowDtypeName(o.dtype))
        .Add("distinct_ids", r.distinct_ids)
        .Add("ids_per_sec", r.seconds > 0 ? r.distinct_ids / r.seconds / o.fresh_fraction : 0.0)
        .Add("baseline_rss_bytes", baseline)
        .Add("max_rss_bytes", r.max_rss)
        .Add("rss_budget_bytes", o.rss_budget_bytes)
        .Add("under_budget", r.max_rss <= o.rss_budget_bytes)
        .Add("stopped_past_twice_the_budget", r.stopped_past_budget)
        .Add("table_rows", r.rows)
        .Add("evicted", r.evicted)
        .Add("seconds", r.seconds);
    PrintResult(line);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::bench
