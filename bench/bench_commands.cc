#include "bench/bench_commands.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_cluster.h"
#include "bench/bench_util.h"
#include "bench/kv_bench.h"
#include "common/optim/optimizer.h"
#include "bench/zmq_bench.h"
#include "common/cpu_affinity.h"
#include "common/json_line.h"
#include "common/status.h"

namespace pstrain::bench {
namespace {

int ServersOr(const BenchOptions& o, int fallback) { return o.servers > 0 ? o.servers : fallback; }

// The raw baseline's options: pinned like the stack's two halves with
// --zmq_pinned.
ZmqBenchOptions Baseline(const BenchOptions& o, size_t bytes, double seconds) {
  ZmqBenchOptions zo{bytes, seconds, o.zmq_contexts, {}, {}};
  if (o.zmq_pinned) {
    CpuHalves halves = SplitAllowedCpus();
    zo.server_cpus = std::move(halves.first);
    zo.client_cpus = std::move(halves.second);
  }
  return zo;
}

JsonLine ZmqLine(const BenchOptions& o, size_t bytes, double gbps, Latencies& lat) {
  JsonLine line;
  line.Add("bench", "zmq")
      .Add("bytes", static_cast<uint64_t>(bytes))
      .Add("gbps", gbps)
      .Add("p50_us", lat.Quantile(0.5))
      .Add("p99_us", lat.Quantile(0.99))
      .Add("contexts", o.zmq_contexts)
      .Add("pinned", !Baseline(o, bytes, 0).client_cpus.empty())
      .Add("samples", static_cast<uint64_t>(lat.count()));
  return line;
}

absl::Status RunZmq(const BenchOptions& o) {
  for (size_t bytes : o.bytes) {
    PS_ASSIGN_OR_RETURN(ZmqBenchResult r, RunZmqBench(Baseline(o, bytes, o.seconds)));
    PrintResult(ZmqLine(o, bytes, r.gbps, r.latency_us));
  }
  return absl::OkStatus();
}

// Alternates zmq and kv runs (`rounds` of each, seconds/rounds long) so
// that both see the same machine load; reports median throughput and
// pooled latencies of each.
absl::Status RunKvAt(const BenchOptions& o, size_t bytes) {
  BenchClusterOptions co;
  co.servers = ServersOr(o, 1);
  co.workers = o.workers;
  co.local_workers = o.workers;
  co.tables = DenseBenchTable(bytes);
  co.stack = o.stack;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(co));
  const int rounds = std::max(1, o.rounds);
  const double slice = o.seconds / rounds;
  std::vector<double> zmq_gbps, kv_gbps;
  Latencies zmq_lat, kv_lat;
  for (int i = 0; i < rounds; ++i) {
    ZmqBenchResult z;
    if (o.kv_baseline) {
      PS_ASSIGN_OR_RETURN(z, RunZmqBench(Baseline(o, bytes, slice)));
      zmq_gbps.push_back(z.gbps);
      zmq_lat.Append(z.latency_us);
    }
    PS_ASSIGN_OR_RETURN(KvBenchResult k, RunKvBench(*cluster, KvBenchOptions{bytes, slice}));
    kv_gbps.push_back(k.gbps);
    kv_lat.Append(k.latency_us);
    spdlog::info("kv {} B round {}: zmq {:.3f} GB/s, kv {:.3f} GB/s", bytes, i, z.gbps, k.gbps);
  }
  PS_RETURN_IF_ERROR(cluster->Finish());
  const double zg = Median(zmq_gbps), kg = Median(kv_gbps);
  const double zp50 = zmq_lat.Quantile(0.5), kp50 = kv_lat.Quantile(0.5);
  if (o.kv_baseline) PrintResult(ZmqLine(o, bytes, zg, zmq_lat));
  JsonLine line;
  line.Add("bench", "kv")
      .Add("servers", co.servers)
      .Add("server_threads", co.stack.server_threads)
      .Add("pinned", !WorkerCpus(co.stack).empty())
      .Add("push_partition_kb", co.stack.push_partition_bytes / 1024)
      .Add("workers", co.workers)
      .Add("bytes", static_cast<uint64_t>(bytes))
      .Add("gbps", kg)
      .Add("p50_us", kp50)
      .Add("p99_us", kv_lat.Quantile(0.99));
  if (o.kv_baseline) {
    line.Add("ratio_vs_zmq", zg > 0 ? kg / zg : 0.0).Add("p50_vs_zmq", zp50 > 0 ? kp50 / zp50 : 0.0);
  }
  line.Add("samples", static_cast<uint64_t>(kv_lat.count()));
  PrintResult(line);
  return absl::OkStatus();
}

absl::Status RunKv(const BenchOptions& o) {
  for (size_t bytes : o.bytes) PS_RETURN_IF_ERROR(RunKvAt(o, bytes));
  return absl::OkStatus();
}

absl::Status RunSparse(const BenchOptions& o) {
  BenchClusterOptions co;
  co.servers = ServersOr(o, 2);
  co.workers = o.workers;
  co.local_workers = o.workers;
  co.tables = SparseBenchTable(o.sparse.dim, o.sparse.dtype, o.sparse.optimizer);
  co.stack = o.stack;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(co));
  SparseBenchOptions so = o.sparse;
  so.seconds = o.seconds;
  PS_ASSIGN_OR_RETURN(SparseBenchResult r, RunSparseBench(*cluster, so));
  PS_RETURN_IF_ERROR(cluster->Finish());
  JsonLine line;
  line.Add("bench", "sparse")
      .Add("servers", co.servers)
      .Add("server_threads", co.stack.server_threads)
      .Add("pinned", !WorkerCpus(co.stack).empty())
      .Add("workers", co.workers)
      .Add("ids", so.ids)
      .Add("dim", static_cast<int64_t>(so.dim))
      .Add("zipf", so.zipf)
      .Add("dtype", RowDtypeName(so.dtype))
      .Add("optimizer", optim::OptimizerKindName(so.optimizer))
      .Add("pull_rows_per_sec", r.pull_rows_per_sec)
      .Add("push_rows_per_sec", r.push_rows_per_sec)
      .Add("push_unique_rows_per_sec", r.push_unique_rows_per_sec)
      .Add("unique_ids_per_iter", r.unique_per_iteration)
      .Add("pull_p50_us", r.pull_p50_us)
      .Add("push_p50_us", r.push_p50_us)
      .Add("table_rows", r.table_rows)
      .Add("bytes_per_row", r.bytes_per_row)
      .Add("bytes_per_row_without_scratch", r.bytes_per_row_without_scratch)
      .Add("value_bytes_per_row", r.value_bytes_per_row)
      .Add("state_bytes_per_row", r.state_bytes_per_row)
      .Add("index_bytes_per_row", r.index_bytes_per_row)
      .Add("scratch_bytes", r.scratch_bytes)
      .Add("iterations", r.iterations);
  PrintResult(line);
  return absl::OkStatus();
}

// The metrics-serving fields of a train line.
void AddScrapes(const TrainBenchOptions& to, const TrainBenchResult& r, JsonLine* line) {
  line->Add("cpu_seconds", r.cpu_seconds)
      .Add("cpu_us_per_sample", r.samples > 0 ? r.cpu_seconds * 1e6 / r.samples : 0.0)
      .Add("metrics", to.metrics_port != 0);
  if (to.metrics_port == 0) return;
  line->Add("scrape_secs", to.scrape_seconds)
      .Add("scrapes", r.scrapes)
      .Add("scrape_failures", r.scrape_failures)
      .Add("scrape_bytes", r.scrape_bytes)
      .Add("scrape_ms", r.scrapes > 0 ? r.scrape_seconds * 1e3 / r.scrapes : 0.0);
}

// The fields every train result line has.
JsonLine TrainLine(const char* mode, const TrainBenchOptions& to, const TrainBenchResult& r) {
  JsonLine line;
  line.Add("bench", "train")
      .Add("mode", mode)
      .Add("model", to.model)
      .Add("device", to.device)
      .Add("batch_size", to.batch_size)
      .Add("samples_per_sec", r.samples_per_sec)
      .Add("steps", r.steps)
      .Add("samples", r.samples)
      .Add("seconds", r.seconds);
  if (!to.train_data.empty()) line.Add("train_data", absl::StrJoin(to.train_data, ","));
  return line;
}

absl::Status RunTrain(const BenchOptions& o) {
  const std::string& mode = o.train_mode;
  if (mode != "local" && mode != "tables" && mode != "ps" && mode != "both" && mode != "all") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode=", mode, ": expected local, tables, ps, both or all"));
  }
  const bool all = mode == "all";
  TrainBenchOptions to = o.train;
  to.seconds = o.seconds;
  to.stack = o.stack;
  auto add_parts = [](const TrainBenchResult& r, JsonLine* line) {
    JsonLine parts;
    for (const auto& [part, seconds] : r.cpu_by_part) {
      parts.Add(part, r.samples > 0 ? seconds * 1e6 / r.samples : 0.0);
    }
    line->AddRaw("cpu_us_per_sample_by_part", parts.str());
    if (r.wakeups_by_part.empty() || r.steps == 0) return;
    JsonLine wakeups;
    double all = 0;
    for (const auto& [part, n] : r.wakeups_by_part) {
      wakeups.Add(part, n / static_cast<double>(r.steps));
      all += n;
    }
    line->Add("wakeups_per_step", all / static_cast<double>(r.steps));
    line->AddRaw("wakeups_per_step_by_part", wakeups.str());
  };
  if (mode == "local" || mode == "both" || all) {
    PS_ASSIGN_OR_RETURN(TrainBenchResult r, RunTrainLocal(to));
    JsonLine line = TrainLine("local", to, r);
    line.Add("local_batches", to.local_batches);
    AddScrapes(to, r, &line);
    PrintResult(line);
  }
  if (mode == "tables" || all) {
    PS_ASSIGN_OR_RETURN(TrainBenchResult r, RunTrainTables(to));
    JsonLine line = TrainLine("tables", to, r);
    line.Add("cpu_seconds", r.cpu_seconds)
        .Add("cpu_us_per_sample", r.samples > 0 ? r.cpu_seconds * 1e6 / r.samples : 0.0);
    add_parts(r, &line);
    PrintResult(line);
  }
  if (mode == "ps" || mode == "both" || all) {
    PS_ASSIGN_OR_RETURN(TrainBenchResult r, RunTrainPs(to));
    JsonLine line = TrainLine("ps", to, r);
    line.Add("servers", to.servers)
        .Add("consistency", to.consistency == proto::Consistency::kBsp ? "bsp" : "asp")
        .Add("push_with_pull", to.push_with_pull)
        .Add("pull_dtype", to.stack.pull_f16 ? "fp16" : "fp32");
    line.Add("compute_seconds", r.compute_seconds)
        .Add("wait_seconds", r.wait_seconds)
        .Add("data_seconds", r.data_seconds)
        .Add("other_seconds",
             r.seconds - r.compute_seconds - r.wait_seconds - r.data_seconds)
        .Add("reader_rows_per_sec", r.reader_rows_per_sec);
    AddScrapes(to, r, &line);
    add_parts(r, &line);
    PrintResult(line);
  }
  return absl::OkStatus();
}

absl::Status RunAll(const BenchOptions& o) {
  BenchOptions kv = o;
  kv.bytes = {64, size_t{4} << 20};
  PS_RETURN_IF_ERROR(RunKv(kv));
  BenchOptions sparse = o;
  sparse.sparse.ids = 100000;
  sparse.sparse.dim = 16;
  sparse.sparse.zipf = 1.1;
  if (sparse.servers <= 0) sparse.servers = 2;
  PS_RETURN_IF_ERROR(RunSparse(sparse));
  BenchOptions train = o;
  train.train_mode = "all";
  return RunTrain(train);
}

}  // namespace

const std::vector<std::string>& BenchCommands() {
  static const std::vector<std::string> kCommands = {
      "zmq", "kv", "sparse", "sparse_stream", "sparse_tier", "serve", "export", "train", "reader", "all"};
  return kCommands;
}

absl::Status RunBenchCommand(const std::string& command, const BenchOptions& options) {
  if (options.bytes.empty()) return absl::InvalidArgumentError("--bytes: no sizes");
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be >= 1");
  if (!(options.seconds > 0)) return absl::InvalidArgumentError("--seconds must be > 0");
  if (command == "zmq") return RunZmq(options);
  if (command == "kv") return RunKv(options);
  if (command == "sparse") return RunSparse(options);
  if (command == "train") return RunTrain(options);
  if (command == "reader") return RunReaderBench(options.reader);
  if (command == "sparse_stream") return RunStreamBench(options.stream, options.stack);
  if (command == "sparse_tier") return RunTierBench(options.tier);
  if (command == "serve") return RunServeBench(options.serve);
  if (command == "export") return RunExportBench(options.exports);
  if (command == "all" || command.empty()) return RunAll(options);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown subcommand '", command, "' (zmq, kv, sparse, sparse_stream, sparse_tier, serve, export, train, reader, all)"));
}

}  // namespace pstrain::bench
