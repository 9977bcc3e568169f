// pstrain_bench: benchmarks of the transport, the kv stack, sparse tables
// and training, printing one JSON object per result line on stdout.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/allreduce_bench.h"
#include "bench/bench_commands.h"
#include "common/optim/optimizer.h"
#include "bench/pipeline_bench.h"
#include "common/process.h"
#include "model/graph/model_graph.h"

ABSL_FLAG(std::string, bytes, "64,4194304",
          "zmq, kv: message sizes, comma-separated; a k or m suffix means KiB or MiB (4m).");
ABSL_FLAG(int, servers, 0,
          "kv, sparse, train ps: parameter servers (0: kv 1, sparse 2, train 1).");
ABSL_FLAG(int, workers, 1, "kv, sparse: worker threads, each with its own KvClient.");
ABSL_FLAG(double, seconds, 3.0, "Length of each measurement, in seconds (per result).");
ABSL_FLAG(int, rounds, 5, "kv: alternations of zmq baseline and kv runs (medians reported).");
ABSL_FLAG(int, zmq_contexts, 2,
          "zmq baseline: 2 = client and server each have a ZeroMQ context (like two processes), "
          "1 = one shared context.");
ABSL_FLAG(bool, kv_baseline, true, "kv: run the zmq baseline alongside (false: kv alone, for profiling).");
ABSL_FLAG(bool, batch_io_thread, false,
          "Stack: run ZeroMQ's I/O threads under SCHED_BATCH (ZmqTransportOptions).");
ABSL_FLAG(bool, pin_nodes, true,
          "Stack (kv, sparse): pin the servers' I/O threads to one half of this process's CPUs "
          "and the workers' (and the bench threads using them) to the other half, as if on two "
          "hosts (pstrain_server/pstrain_worker --cpus, pstrain local --pin_cpus). Ignored with "
          "fewer than 2 CPUs.");
ABSL_FLAG(int, push_partition_kb, 1024,
          "Stack: a server's share of a dense push larger than this travels in pieces of at most "
          "this many KiB (pstrain_worker --push_partition_kb; 0: one message).");
ABSL_FLAG(bool, zmq_pinned, false,
          "zmq baseline (alone or next to kv): pin its server and client threads to the two "
          "halves of the CPUs, the way --pin_nodes pins the stack (default: a plain ZeroMQ "
          "program, placed by the scheduler).");
ABSL_FLAG(int, socket_buffer_bytes, 0,
          "Stack: SO_SNDBUF/SO_RCVBUF of its TCP connections (0: kernel autotuning).");
ABSL_FLAG(int, server_threads, 1,
          "kv, sparse, train ps: executor threads per server (pstrain_server --server_threads).");
ABSL_FLAG(int, ids, 100000, "sparse: ids pulled per iteration.");
ABSL_FLAG(int, dim, 16, "sparse: floats per row.");
ABSL_FLAG(double, zipf, 1.1, "sparse: Zipf exponent of the ids drawn.");
ABSL_FLAG(uint64_t, id_space, 10000000, "sparse: ids are drawn from this many distinct ids.");
ABSL_FLAG(std::string, dtype, "fp32", "sparse, sparse_stream: how the servers store values (fp32, fp16, bf16).");
ABSL_FLAG(std::string, optimizer, "adagrad",
          "sparse: the table's optimizer (sgd, adagrad, rowwise_adagrad, adam, ftrl).");
ABSL_FLAG(uint64_t, distinct_ids, 50000000, "sparse_stream: fresh ids streamed in each run.");
ABSL_FLAG(double, fresh_fraction, 0.5, "sparse_stream: share of each pull's --ids that are fresh.");
ABSL_FLAG(uint64_t, hot_ids, 1000000, "sparse_stream: size of the Zipf(--zipf) hot set.");
ABSL_FLAG(uint64_t, max_rows, 2000000, "sparse_stream: the bounded run's max_rows.");
ABSL_FLAG(std::string, evict_policy, "lru", "sparse_stream: the bounded run's policy, lru or lfu.");
ABSL_FLAG(double, rss_budget_mb, 1024, "sparse_stream: the resident memory budget, MiB.");
ABSL_FLAG(uint64_t, tier_rows, 16000000,
          "sparse_tier: rows of the table (with --dim: its size; e.g. 16M x 64 = 1 billion "
          "parameters).");
ABSL_FLAG(uint64_t, serve_rows, 1000000, "serve: embedding rows of each model version (all tables).");
ABSL_FLAG(uint64_t, serve_delta_rows, 1000000,
          "serve: rows of the delta applied under load (the base has at least as many).");
ABSL_FLAG(uint64_t, export_rows, 10000000, "export: rows of the table (with --dim).");
ABSL_FLAG(double, export_changed, 0.01, "export: the fraction of the rows a delta holds.");
ABSL_FLAG(int, serve_threads, 2, "serve: the server's request threads.");
ABSL_FLAG(int, serve_batch, 256, "serve: rows per request in the batch phase.");
ABSL_FLAG(double, ram_fraction, 0.1, "sparse_tier: share of the rows the budget keeps in RAM.");
ABSL_FLAG(std::string, tier_store, "slots", "sparse_tier: the tier's store, slots or rocksdb.");
ABSL_FLAG(std::string, tier_dir, "", "sparse_tier: folder of the tier and checkpoint (default: under the temp folder).");
ABSL_FLAG(bool, unbounded, true, "sparse_stream: also run without eviction.");
ABSL_FLAG(std::string, model, "dlrm", "train: model (lr | wide_deep | dlrm | dcn_v2 | deepfm | deep_tower).");
ABSL_FLAG(std::string, train_data, "",
          "train: these files (comma-separated; text or Parquet), read with --schema, instead "
          "of synthetic Criteo rows: --mode=local times the model on their first "
          "--local_batches batches, tables and ps train one pass over them (--train_rows is "
          "then unused)");
ABSL_FLAG(std::string, schema, "", "train --train_data: the schema file that reads them");
ABSL_FLAG(std::string, model_file, "",
          "train: a model file's network instead of --model (13 dense, 26 categorical columns).");
ABSL_FLAG(int, batch_size, 1024, "train: rows per step.");
ABSL_FLAG(std::string, device, "cpu",
          "train: where the model computes, cpu | cuda (local, tables and ps modes; "
          "Unavailable without a GPU).");
ABSL_FLAG(std::string, mode, "both",
          "train: local (model alone) | tables (model, tables and reader in one process, no "
          "server) | ps (1 server + 1 worker) | both (local, ps) | all (local, tables, ps).");
ABSL_FLAG(std::string, pull_dtype, "fp32",
          "kv, train ps: fp32 | fp16, the precision of pulled values on the wire "
          "(pstrain_worker --pull_dtype).");
ABSL_FLAG(std::string, consistency, "asp", "train ps: asp | bsp (the cluster's consistency model).");
ABSL_FLAG(bool, push_with_pull, true,
          "train ps: each step's push travels with the next pull, one message to each server "
          "(false: a message each, as before issue 42).");
ABSL_FLAG(int64_t, train_rows, 300000, "train tables, ps: rows in the synthetic training file.");
ABSL_FLAG(int, local_batches, 8,
          "train local: distinct in-memory batches cycled through (each with its own rows and "
          "gradients; 8 stay in this machine's caches, 64 do not).");
ABSL_FLAG(int, metrics_port, 0,
          "train: serve /metrics from the stack (ps: the server on this port, the worker on "
          "port+1; local: this process) and scrape it every --scrape_secs while training; "
          "-1 picks free ports; 0: off.");
ABSL_FLAG(double, scrape_secs, 1.0, "train: interval of the /metrics scraper (with --metrics_port).");
ABSL_FLAG(int64_t, reader_rows, 200000, "reader: rows in the generated Criteo-shaped TSV.");
ABSL_FLAG(int, reader_passes, 6, "reader: scans of each input; the fastest is reported.");
ABSL_FLAG(std::string, reader_data, "",
          "reader: files or globs (comma-separated; text or Parquet) read by a DataReader end to "
          "end instead of the synthetic inputs, once per --reader_threads value (median of "
          "--reader_passes passes after an untimed one, each a new reader; then as many epochs "
          "of one reader after its first: epoch_rows_per_sec).");
ABSL_FLAG(std::string, reader_schema, "", "reader --reader_data: its schema file (empty: the Criteo layout).");
ABSL_FLAG(std::string, reader_threads, "1",
          "reader --reader_data: the reader_threads values to measure, comma-separated.");
ABSL_FLAG(double, bucket_mb, 25, "allreduce: gradient bucket size of the bucketed path, MiB.");
ABSL_FLAG(int, overlap_steps, 0,
          "allreduce: also measure overlap with backward: deep_tower training steps per round (0: off).");
ABSL_FLAG(int, tower_layers, 12, "allreduce overlap: deep_tower layers.");
ABSL_FLAG(int, tower_width, 1024, "allreduce overlap: deep_tower layer width.");
ABSL_FLAG(std::string, log_level, "warn", "Logs on stderr: trace | debug | info | warn | error.");

namespace {

constexpr char kUsage[] =
    "pstrain_bench [SUBCOMMAND] [--flags]\n"
    "Prints one JSON object per result line on stdout; logs go to stderr.\n"
    "Subcommands:\n"
    "  zmq     raw ZeroMQ DEALER/ROUTER request/reply of --bytes over tcp loopback,\n"
    "          one request outstanding: {bench,bytes,gbps,p50_us,p99_us}\n"
    "  kv      dense Push + Pull of --bytes through coordinator + --servers\n"
    "          ParameterServers + --workers KvClients (threads, tcp loopback), with the\n"
    "          zmq baseline of the same size alternated in the same run:\n"
    "          {bench,servers,workers,bytes,gbps,p50_us,p99_us,ratio_vs_zmq,p50_vs_zmq}\n"
    "  sparse  pull --ids ids drawn Zipf(--zipf) over --id_space, --dim floats per\n"
    "          row, then push Adagrad gradients of the distinct ones:\n"
    "          {bench,servers,ids,dim,zipf,pull_rows_per_sec,push_rows_per_sec,bytes_per_row}\n"
    "  train   --model at --batch_size: --mode=local (model alone, in-memory batches)\n"
    "          and/or ps (1 server + 1 worker running the Trainer on a synthetic file)\n"
    "          and/or tables (ps's training in one process: the same tables, optimizers\n"
    "          and reader, pulls and pushes called directly; ps less tables is what\n"
    "          distributing the tables costs)\n"
    "  allreduce --workers ranks (threads, Gloo TCP over loopback; default 2) all-reduce\n"
    "          --bytes (default 4k,64k,1m,16m,64m) with gloo::allreduce directly, the\n"
    "          pstrain Collective and the bucketed DenseReplica path, --rounds each:\n"
    "          {bench,impl,workers,bytes,algbw_gbps,busbw_gbps,us}; --overlap_steps=N adds\n"
    "          the overlap of the buckets with deep_tower's backward pass\n"
    "  pipeline the deep_tower model through --stages x --microbatches (own flags:\n"
    "          pstrain_bench pipeline --help): {bench,stages,microbatches,schedule,bubble,...}\n"
    "  sparse_stream a stream of --distinct_ids fresh ids mixed with a Zipf hot set\n"
    "          through one server, with --max_rows eviction and unbounded: the process's\n"
    "          resident memory over time against --rss_budget_mb:\n"
    "          {bench,run,seconds,distinct_ids,rss_bytes,table_rows}, then {summary,...}\n"
    "  sparse_tier one server shard of --tier_rows x --dim (--optimizer) with a disk\n"
    "          tier keeping --ram_fraction of the rows in RAM, in process: trained once,\n"
    "          checkpointed and restored (rows must be identical), then Zipf pulls timed\n"
    "          against the same table all in RAM, --rounds windows of --seconds:\n"
    "          {bench,phase,...}, then {summary,ratio,ram_hit_rate,rss_tiered_bytes,...}\n"
    "  serve   a DLRM export of --serve_rows rows served over HTTP in process (--serve_threads):\n"
    "          1-row latency, rows/s at --serve_batch rows, and a new version of --serve_rows\n"
    "          rows loaded under load: {bench,phase,p50_us,p99_us,rows_per_sec,...}, then {summary}\n"
    "  export  one server store of --export_rows x --dim (Adagrad), every row trained:\n"
    "          a base export (every row) and a delta after --export_changed of the rows are\n"
    "          pushed again, dumped and written as --export_dir versions:\n"
    "          {bench,kind,rows,bytes,bytes_per_row,...}, then {summary,delta_bytes_ratio,...}\n"
    "  reader  one synthetic Criteo TSV (--reader_rows rows) written plain, .gz (zlib\n"
    "          default level) and .zst (level 3), scanned and parsed on one thread:\n"
    "          {bench,input,rows,file_bytes,rows_per_sec,text_mb_per_sec,vs_tsv,...};\n"
    "          or --reader_data (with --reader_schema) read by a DataReader per\n"
    "          --reader_threads value: {bench,input,format,threads,rows,rows_per_sec,\n"
    "          epoch_rows_per_sec (one reader's later epochs),checksum,...}\n"
    "  all     (default) kv at 64 B and 4 MiB, sparse 100k ids dim 16 zipf 1.1 on 2\n"
    "          servers, train local and ps\n"
    "gbps counts bytes sent plus bytes received, in 1e9 bytes per second.";

bool ParseBytes(absl::string_view text, std::vector<size_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string p = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
    size_t scale = 1;
    if (!p.empty() && (p.back() == 'k' || p.back() == 'm')) {
      scale = p.back() == 'k' ? size_t{1} << 10 : size_t{1} << 20;
      p.pop_back();
    }
    uint64_t v = 0;
    if (!absl::SimpleAtoi(p, &v) || v == 0) return false;
    out->push_back(static_cast<size_t>(v) * scale);
  }
  return !out->empty();
}

// `allreduce`: its own defaults for --bytes (a sweep) and --workers (2).
absl::Status RunAllreduce(const pstrain::bench::BenchOptions& o) {
  pstrain::bench::AllreduceBenchOptions a;
  const absl::CommandLineFlag& bytes = absl::GetFlagReflectionHandle(FLAGS_bytes);
  if (bytes.CurrentValue() != bytes.DefaultValue()) a.bytes = o.bytes;
  a.ranks = std::max(2, o.workers);
  const absl::CommandLineFlag& seconds = absl::GetFlagReflectionHandle(FLAGS_seconds);
  if (seconds.CurrentValue() != seconds.DefaultValue()) a.seconds = o.seconds;  // else 1 s
  a.rounds = o.rounds;
  const double bucket_mb = absl::GetFlag(FLAGS_bucket_mb);
  if (!(bucket_mb > 0)) return absl::InvalidArgumentError("--bucket_mb must be positive");
  a.bucket_bytes = static_cast<size_t>(bucket_mb * (1 << 20));
  a.overlap_steps = absl::GetFlag(FLAGS_overlap_steps);
  a.overlap_rounds = o.rounds;
  a.tower_layers = absl::GetFlag(FLAGS_tower_layers);
  a.tower_width = absl::GetFlag(FLAGS_tower_width);
  if (a.tower_layers < 1 || a.tower_width < 1) {
    return absl::InvalidArgumentError("--tower_layers and --tower_width must be positive");
  }
  const absl::CommandLineFlag& batch = absl::GetFlagReflectionHandle(FLAGS_batch_size);
  if (batch.CurrentValue() != batch.DefaultValue()) a.batch_size = o.train.batch_size;
  return pstrain::bench::RunAllreduceBench(a);
}

}  // namespace

int main(int argc, char** argv) {
  // `pipeline` has flags of its own (the worker's pipeline flags); it parses them itself.
  if (argc > 1 && std::string_view(argv[1]) == "pipeline") {
    return pstrain::bench::RunPipelineBench(argc, argv);
  }
  std::vector<std::string> args = pstrain::ParseFlagsWithEnv(argc, argv, kUsage);
  pstrain::InitLogging("bench", absl::GetFlag(FLAGS_log_level));
  if (args.size() > 1) {
    spdlog::error("one subcommand at most, got {}", args.size());
    return 2;
  }
  pstrain::bench::BenchOptions o;
  if (!ParseBytes(absl::GetFlag(FLAGS_bytes), &o.bytes)) {
    spdlog::error("--bytes={}: expected positive sizes like 64,4m", absl::GetFlag(FLAGS_bytes));
    return 2;
  }
  o.servers = absl::GetFlag(FLAGS_servers);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.seconds = absl::GetFlag(FLAGS_seconds);
  o.rounds = absl::GetFlag(FLAGS_rounds);
  o.zmq_contexts = absl::GetFlag(FLAGS_zmq_contexts);
  o.kv_baseline = absl::GetFlag(FLAGS_kv_baseline);
  o.stack.batch_io_thread = absl::GetFlag(FLAGS_batch_io_thread);
  o.stack.socket_buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  o.stack.pin_nodes = absl::GetFlag(FLAGS_pin_nodes);
  if (absl::GetFlag(FLAGS_push_partition_kb) < 0) {
    spdlog::error("--push_partition_kb must not be negative");
    return 2;
  }
  o.stack.push_partition_bytes =
      uint64_t{1024} * static_cast<uint64_t>(absl::GetFlag(FLAGS_push_partition_kb));
  o.zmq_pinned = absl::GetFlag(FLAGS_zmq_pinned);
  if (absl::GetFlag(FLAGS_pull_dtype) != "fp32" && absl::GetFlag(FLAGS_pull_dtype) != "fp16") {
    spdlog::error("--pull_dtype={}: want fp32 or fp16", absl::GetFlag(FLAGS_pull_dtype));
    return 2;
  }
  o.stack.pull_f16 = absl::GetFlag(FLAGS_pull_dtype) == "fp16";
  o.stack.server_threads = absl::GetFlag(FLAGS_server_threads);
  if (o.stack.server_threads < 1) {
    spdlog::error("--server_threads must be at least 1");
    return 2;
  }
  o.sparse.ids = absl::GetFlag(FLAGS_ids);
  o.sparse.dim = static_cast<uint32_t>(absl::GetFlag(FLAGS_dim));
  o.sparse.zipf = absl::GetFlag(FLAGS_zipf);
  o.sparse.id_space = absl::GetFlag(FLAGS_id_space);
  o.train.model = absl::GetFlag(FLAGS_model);
  if (const std::string file = absl::GetFlag(FLAGS_model_file); !file.empty()) {
    absl::StatusOr<pstrain::worker::graph::ModelGraph> g = pstrain::worker::graph::ReadModelGraph(file);
    if (!g.ok()) {
      spdlog::error("--model_file: {}", std::string(g.status().message()));
      return 2;
    }
    o.train.model = g->name.empty() ? "model_file" : g->name + "_file";
    o.train.model_graph = std::make_shared<pstrain::worker::graph::ModelGraph>(*std::move(g));
  }
  o.train.schema_file = absl::GetFlag(FLAGS_schema);
  o.train.train_data = absl::StrSplit(absl::GetFlag(FLAGS_train_data), ',', absl::SkipEmpty());
  o.train.device = absl::GetFlag(FLAGS_device);
  if (o.train.device != "cpu" && o.train.device != "cuda") {
    spdlog::error("--device={}: want cpu or cuda", o.train.device);
    return 2;
  }
  o.train.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.train.train_rows = absl::GetFlag(FLAGS_train_rows);
  o.train.local_batches = absl::GetFlag(FLAGS_local_batches);
  o.train.servers = std::max(1, o.servers);
  o.train.push_with_pull = absl::GetFlag(FLAGS_push_with_pull);
  if (absl::GetFlag(FLAGS_consistency) == "bsp") {
    o.train.consistency = pstrain::proto::Consistency::kBsp;
  } else if (absl::GetFlag(FLAGS_consistency) != "asp") {
    spdlog::error("--consistency={}: want asp or bsp", absl::GetFlag(FLAGS_consistency));
    return 2;
  }
  o.train_mode = absl::GetFlag(FLAGS_mode);
  if (!pstrain::ParseRowDtype(absl::GetFlag(FLAGS_dtype), &o.sparse.dtype)) {
    spdlog::error("--dtype={}: want fp32, fp16 or bf16", absl::GetFlag(FLAGS_dtype));
    return 2;
  }
  {
    bool known = false;
    for (auto k : {pstrain::OptimizerKind::kSgd, pstrain::OptimizerKind::kAdagrad,
                   pstrain::OptimizerKind::kRowwiseAdagrad, pstrain::OptimizerKind::kAdam,
                   pstrain::OptimizerKind::kFtrl}) {
      if (absl::GetFlag(FLAGS_optimizer) == pstrain::optim::OptimizerKindName(k)) {
        o.sparse.optimizer = k;
        known = true;
      }
    }
    if (!known) {
      spdlog::error("--optimizer={}: want sgd, adagrad, rowwise_adagrad, adam or ftrl",
                    absl::GetFlag(FLAGS_optimizer));
      return 2;
    }
  }
  o.stream.dtype = o.sparse.dtype;
  o.stream.distinct_ids = absl::GetFlag(FLAGS_distinct_ids);
  o.stream.ids = o.sparse.ids;
  o.stream.dim = o.sparse.dim;
  o.stream.zipf = o.sparse.zipf;
  o.stream.fresh_fraction = absl::GetFlag(FLAGS_fresh_fraction);
  o.stream.hot_ids = absl::GetFlag(FLAGS_hot_ids);
  o.stream.max_rows = absl::GetFlag(FLAGS_max_rows);
  o.stream.policy = absl::GetFlag(FLAGS_evict_policy);
  o.stream.rss_budget_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_rss_budget_mb) * (1 << 20));
  o.stream.unbounded = absl::GetFlag(FLAGS_unbounded);
  o.serve.rows = absl::GetFlag(FLAGS_serve_rows);
  o.serve.threads = absl::GetFlag(FLAGS_serve_threads);
  o.serve.delta_rows = absl::GetFlag(FLAGS_serve_delta_rows);
  o.exports.rows = absl::GetFlag(FLAGS_export_rows);
  o.exports.dim = o.sparse.dim;
  o.exports.changed = absl::GetFlag(FLAGS_export_changed);
  o.serve.batch = absl::GetFlag(FLAGS_serve_batch);
  o.serve.seconds = o.seconds;
  o.tier.rows = absl::GetFlag(FLAGS_tier_rows);
  o.tier.dim = o.sparse.dim;
  o.tier.optimizer = o.sparse.optimizer;
  o.tier.ram_fraction = absl::GetFlag(FLAGS_ram_fraction);
  o.tier.zipf = o.sparse.zipf;
  o.tier.ids = o.sparse.ids;
  o.tier.seconds = o.seconds;
  o.tier.rounds = o.rounds;
  o.tier.dir = absl::GetFlag(FLAGS_tier_dir);
  o.tier.store = absl::GetFlag(FLAGS_tier_store);
  o.reader.rows = absl::GetFlag(FLAGS_reader_rows);
  o.reader.passes = absl::GetFlag(FLAGS_reader_passes);
  o.reader.data = absl::StrSplit(absl::GetFlag(FLAGS_reader_data), ',', absl::SkipEmpty());
  o.reader.schema = absl::GetFlag(FLAGS_reader_schema);
  o.reader.threads.clear();
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_reader_threads), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      spdlog::error("--reader_threads={}: expected positive integers, comma-separated",
                    absl::GetFlag(FLAGS_reader_threads));
      return 2;
    }
    o.reader.threads.push_back(n);
  }
  if (o.sparse.ids < 1 || o.sparse.dim < 1 || !(o.sparse.zipf > 0) || o.sparse.id_space < 1 ||
      o.train.batch_size < 1 || o.train.train_rows < 1 || o.train.local_batches < 1) {
    spdlog::error("--ids, --dim, --zipf, --id_space, --batch_size, --train_rows and --local_batches "
                  "must be positive");
    return 2;
  }
  o.train.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.train.scrape_seconds = absl::GetFlag(FLAGS_scrape_secs);
  if (o.servers < 0) {
    spdlog::error("--servers={}: expected 0 (the bench's default) or more", o.servers);
    return 2;
  }
  if (o.train.metrics_port < -1 || o.train.metrics_port > 65534 || !(o.train.scrape_seconds > 0)) {
    spdlog::error("--metrics_port must be -1..65534 and --scrape_secs positive");
    return 2;
  }
  absl::Status st;
  if (!args.empty() && args[0] == "allreduce") {
    st = RunAllreduce(o);
  } else {
    st = pstrain::bench::RunBenchCommand(args.empty() ? "all" : args[0], o);
  }
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
