#include "bench/sparse_bench.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/hash.h"
#include "data/zipf.h"

namespace pstrain::bench {
namespace {

struct IdBatch {
  std::vector<uint64_t> ids;     // N, as drawn
  std::vector<uint64_t> unique;  // distinct ids
  Buffer grads;                  // unique x dim
};

std::vector<IdBatch> MakeBatches(const SparseBenchOptions& o, uint64_t seed) {
  worker::ZipfSampler zipf(o.id_space, o.zipf);
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  std::vector<IdBatch> batches(o.batches);
  for (IdBatch& b : batches) {
    b.ids.resize(o.ids);
    // Rank -> id through a bijective mix, so hot ids spread over servers.
    for (uint64_t& id : b.ids) id = Mix64(zipf.Sample(uniform));
    b.unique = b.ids;
    std::sort(b.unique.begin(), b.unique.end());
    b.unique.erase(std::unique(b.unique.begin(), b.unique.end()), b.unique.end());
    std::shuffle(b.unique.begin(), b.unique.end(), rng);
    uint8_t* raw = nullptr;
    const size_t n = b.unique.size() * o.dim;
    b.grads = Buffer::Allocate(n * sizeof(float), &raw);
    float* g = reinterpret_cast<float*>(raw);
    for (size_t i = 0; i < n; ++i) g[i] = 0.01f * (static_cast<float>(i % 7) - 3.0f);
  }
  return batches;
}

struct WorkerRun {
  absl::Status status;
  int64_t iterations = 0;
  uint64_t rows = 0, unique_rows = 0;
  double pull_seconds = 0, push_seconds = 0;
  Latencies pull_us, push_us;
};

void RunWorker(worker::KvClient& kv, const SparseBenchOptions& o, int rank,
               std::atomic<int>& ready, int num_workers, WorkerRun* out) {
  std::vector<IdBatch> batches = MakeBatches(o, o.seed + 7919 * static_cast<uint64_t>(rank));
  std::vector<float> values(static_cast<size_t>(o.ids) * o.dim);
  int64_t clock = 0;
  auto iteration = [&](const IdBatch& b, double* pull_s, double* push_s) -> absl::Status {
    const auto t0 = Clock::now();
    worker::PullHandle pl = kv.Pull({}, {worker::SparsePull{0, b.ids, values.data()}}, clock);
    PS_RETURN_IF_ERROR(pl.Wait().status());
    const auto t1 = Clock::now();
    worker::PushHandle ph = kv.Push({}, {worker::SparsePush{0, b.unique, b.grads}},
                                    static_cast<uint32_t>(b.ids.size()), clock);
    PS_RETURN_IF_ERROR(ph.Wait());
    const auto t2 = Clock::now();
    ++clock;
    *pull_s = std::chrono::duration<double>(t1 - t0).count();
    *push_s = std::chrono::duration<double>(t2 - t1).count();
    return absl::OkStatus();
  };
  double pull_s = 0, push_s = 0;
  // Warm-up: every batch once, creating its rows.
  for (const IdBatch& b : batches) {
    out->status = iteration(b, &pull_s, &push_s);
    if (!out->status.ok()) break;
  }
  ready.fetch_add(1);
  while (ready.load() < num_workers) std::this_thread::yield();
  if (!out->status.ok()) return;
  const auto start = Clock::now();
  for (size_t k = 0; SecondsSince(start) < o.seconds; ++k) {
    const IdBatch& b = batches[k % batches.size()];
    out->status = iteration(b, &pull_s, &push_s);
    if (!out->status.ok()) return;
    ++out->iterations;
    out->rows += b.ids.size();
    out->unique_rows += b.unique.size();
    out->pull_seconds += pull_s;
    out->push_seconds += push_s;
    out->pull_us.Add(pull_s * 1e6);
    out->push_us.Add(push_s * 1e6);
  }
}

}  // namespace

std::vector<TableSpec> SparseBenchTable(uint32_t dim, RowDtype dtype, OptimizerKind optimizer) {
  TableSpec t;
  t.id = 0;
  t.name = "bench.sparse";
  t.kind = TableKind::kSparse;
  t.dim = dim;
  t.optimizer.kind = optimizer;
  t.dtype = dtype;
  t.optimizer.lr = 0.01f;
  t.init.kind = InitKind::kUniform;
  t.init.scale = 0.01f;
  return {t};
}

absl::StatusOr<SparseBenchResult> RunSparseBench(BenchCluster& cluster,
                                                 const SparseBenchOptions& options) {
  const int W = cluster.num_local_workers();
  std::vector<WorkerRun> runs(W);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w) {
    threads.emplace_back([&, w] {
      if (!cluster.worker_cpus().empty()) (void)PinCurrentThread(cluster.worker_cpus());
      RunWorker(cluster.kv(w), options, w, ready, W, &runs[w]);
    });
  }
  for (auto& t : threads) t.join();
  SparseBenchResult r;
  Latencies pull_us, push_us;
  uint64_t unique = 0;
  for (WorkerRun& run : runs) {
    PS_RETURN_IF_ERROR(run.status);
    r.iterations += run.iterations;
    unique += run.unique_rows;
    // Workers run side by side: their rates add up.
    if (run.pull_seconds > 0) r.pull_rows_per_sec += run.rows / run.pull_seconds;
    if (run.push_seconds > 0) {
      r.push_rows_per_sec += run.rows / run.push_seconds;
      r.push_unique_rows_per_sec += run.unique_rows / run.push_seconds;
    }
    pull_us.Append(run.pull_us);
    push_us.Append(run.push_us);
  }
  r.unique_per_iteration = r.iterations > 0 ? double(unique) / double(r.iterations) : 0;
  r.pull_p50_us = pull_us.Quantile(0.5);
  r.push_p50_us = push_us.Quantile(0.5);
  uint64_t bytes = 0, index_bytes = 0, scratch_bytes = 0, value_bytes = 0, state_bytes = 0;
  for (int s = 0; s < cluster.num_servers(); ++s) {
    PS_ASSIGN_OR_RETURN(std::vector<server::TableStats> stats,
                        cluster.server(s).StoreStats(absl::Seconds(30)));
    for (const server::TableStats& t : stats) {
      if (!t.sparse) continue;
      r.table_rows += t.rows;
      bytes += t.bytes;
      index_bytes += t.index_bytes;
      value_bytes += t.value_bytes;
      state_bytes += t.state_bytes;
      scratch_bytes += t.scratch_bytes;
    }
  }
  if (r.table_rows > 0) {
    const double rows = static_cast<double>(r.table_rows);
    r.bytes_per_row = double(bytes) / rows;
    r.index_bytes_per_row = double(index_bytes) / rows;
    r.value_bytes_per_row = double(value_bytes) / rows;
    r.state_bytes_per_row = double(state_bytes) / rows;
    r.bytes_per_row_without_scratch = double(bytes - scratch_bytes) / rows;
  }
  r.scratch_bytes = static_cast<double>(scratch_bytes);
  return r;
}

}  // namespace pstrain::bench
