#include "bench/kv_bench.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"

namespace pstrain::bench {
namespace {

constexpr int kWarmupIterations = 20;

struct WorkerRun {
  absl::Status status;
  int64_t iterations = 0;
  double seconds = 0;
  Latencies latency_us;
};

void RunWorker(worker::KvClient& kv, size_t floats, double seconds, std::atomic<int>& ready,
               int num_workers, WorkerRun* out) {
  uint8_t* raw = nullptr;
  Buffer grads = Buffer::Allocate(floats * sizeof(float), &raw);
  float* g = reinterpret_cast<float*>(raw);
  std::fill(g, g + floats, 1e-6f);
  const std::vector<worker::DensePush> push = {worker::DensePush{0, grads}};
  const std::vector<uint32_t> dense = {0};
  int64_t clock = 0;
  auto iteration = [&]() -> absl::Status {
    worker::PushHandle ph = kv.Push(push, {}, /*num_samples=*/1, clock);
    worker::PullHandle pl = kv.Pull(dense, {}, clock + 1);
    ++clock;
    PS_ASSIGN_OR_RETURN(std::vector<Buffer> values, pl.Wait());
    PS_RETURN_IF_ERROR(ph.Wait());
    if (values.size() != 1 || values[0].size() != floats * sizeof(float)) {
      return absl::InternalError(absl::StrCat("pulled ", values.empty() ? 0 : values[0].size(),
                                              " bytes, expected ", floats * sizeof(float)));
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < kWarmupIterations && out->status.ok(); ++i) out->status = iteration();
  ready.fetch_add(1);
  while (ready.load() < num_workers) std::this_thread::yield();
  if (!out->status.ok()) return;
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    out->status = iteration();
    const auto t1 = Clock::now();
    if (!out->status.ok()) return;
    out->latency_us.Add(std::chrono::duration<double, std::micro>(t1 - t0).count());
    ++out->iterations;
    if (std::chrono::duration<double>(t1 - start).count() >= seconds) break;
  }
  out->seconds = SecondsSince(start);
}

}  // namespace

std::vector<TableSpec> DenseBenchTable(size_t bytes) {
  TableSpec t;
  t.id = 0;
  t.name = "bench.dense";
  t.kind = TableKind::kDense;
  t.size = std::max<uint64_t>(1, bytes / sizeof(float));
  t.optimizer.kind = OptimizerKind::kSgd;
  t.optimizer.lr = 0.01f;
  return {t};
}

absl::StatusOr<KvBenchResult> RunKvBench(BenchCluster& cluster, const KvBenchOptions& options) {
  const int W = cluster.num_local_workers();
  const size_t floats = std::max<size_t>(1, options.bytes / sizeof(float));
  std::vector<WorkerRun> runs(W);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w) {
    threads.emplace_back([&, w] {
      if (!cluster.worker_cpus().empty()) (void)PinCurrentThread(cluster.worker_cpus());
      RunWorker(cluster.kv(w), floats, options.seconds, ready, W, &runs[w]);
    });
  }
  for (auto& t : threads) t.join();
  KvBenchResult r;
  for (WorkerRun& run : runs) {
    PS_RETURN_IF_ERROR(run.status);
    r.iterations += run.iterations;
    r.seconds = std::max(r.seconds, run.seconds);
    r.latency_us.Append(run.latency_us);
  }
  const double bytes = 2.0 * static_cast<double>(floats * sizeof(float));
  r.gbps = r.seconds > 0 ? bytes * static_cast<double>(r.iterations) / r.seconds / 1e9 : 0;
  return r;
}

}  // namespace pstrain::bench
