#include "bench/serve_bench.h"

#include <time.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/optim/initializer.h"
#include "common/status.h"
#include "data/parser.h"
#include "data/synthetic.h"
#include "serve/model_io.h"
#include "serve/model_server.h"
#include "serve/model_versions.h"

namespace pstrain::bench {
namespace {

constexpr int kRequestRows = 4096;  // distinct rows the requests cycle through

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A DLRM export whose tables hold every id of `lines` plus random others,
// `rows` in all; `seed` varies the values between versions.
absl::StatusOr<worker::SavedModel> MakeModel(const std::vector<std::string>& lines, uint64_t rows,
                                             uint64_t seed) {
  worker::SavedModel saved;
  saved.model.name = "dlrm";
  saved.model.seed = seed;
  saved.step = static_cast<int64_t>(seed);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(saved.model));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<const worker::Parser> parser,
                      worker::CreateParser(saved.schema));
  const int fields = saved.model.num_sparse;
  std::vector<absl::flat_hash_set<uint64_t>> ids(fields);
  worker::ParsedRow row;
  for (const std::string& line : lines) {
    PS_RETURN_IF_ERROR(parser->Parse(line, &row));
    for (int f = 0; f < fields; ++f) {
      for (uint32_t i = row.field_begin(f); i < row.field_end[f]; ++i) ids[f].insert(row.ids[i]);
    }
  }
  std::mt19937_64 rng(seed);
  const uint64_t per_table = rows / static_cast<uint64_t>(fields);
  for (const TableSpec& spec : model->tables()) {
    worker::TableValues t;
    t.spec = spec;
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(spec.init, spec.id));
    if (spec.kind == TableKind::kDense) {
      t.dense.resize(spec.size);
      init.FillRange(0, t.dense.data(), spec.size);
    }
    saved.tables.push_back(std::move(t));
  }
  // Sparse tables in plan order: table k serves field k.
  for (size_t k = 0; k < model->sparse_tables().size(); ++k) {
    worker::TableValues& t = saved.tables[model->sparse_tables()[k]];
    absl::flat_hash_set<uint64_t>& mine = ids[k];
    while (mine.size() < per_table) mine.insert(rng());
    t.ids.assign(mine.begin(), mine.end());
    t.rows.resize(t.ids.size() * t.spec.dim);
    std::normal_distribution<float> value(0.0f, 0.05f);
    for (float& v : t.rows) v = value(rng);
  }
  return saved;
}

struct PhaseResult {
  Latencies latencies;
  int64_t requests = 0, failures = 0, rows = 0;
  double seconds = 0, cpu_seconds = 0;
};

// Sends requests of `rows_per_request` rows, cycling through `lines`, until
// `done` (or `seconds` pass when `done` is null).
PhaseResult RunRequests(int port, const std::vector<std::string>& lines, int rows_per_request,
                        double seconds, const std::atomic<bool>* done) {
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(10, 0);
  PhaseResult r;
  size_t next = 0;
  std::string body;
  const Clock::time_point t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  while (done != nullptr ? !done->load() : SecondsSince(t0) < seconds) {
    body.clear();
    for (int i = 0; i < rows_per_request; ++i) {
      const std::string& l = lines[next++ % lines.size()];
      body.append(l, l.find('\t') + 1).append("\n");  // without the label
    }
    const Clock::time_point s = Clock::now();
    httplib::Result res = client.Post("/predict", body, "text/tab-separated-values");
    r.latencies.Add(SecondsSince(s) * 1e6);
    ++r.requests;
    if (!res || res->status != 200) {
      ++r.failures;
    } else {
      r.rows += rows_per_request;
    }
  }
  r.seconds = SecondsSince(t0);
  r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  return r;
}

struct DeltaResult {
  PhaseResult requests;
  uint64_t rows = 0, base_rows = 0;
  double write_seconds = 0, served_after_seconds = 0;
  bool served = false;
};

// A versioned folder with a base of max(rows, delta_rows) rows, served;
// under 1-row requests, version 2: a delta of delta_rows rows (spread over
// the tables like the base's rows, new values) and the dense weights.
absl::StatusOr<DeltaResult> RunDelta(const ServeBenchOptions& options,
                                     const std::vector<std::string>& lines,
                                     const std::string& export_dir) {
  DeltaResult r;
  r.base_rows = std::max(options.rows, options.delta_rows);
  PS_ASSIGN_OR_RETURN(worker::SavedModel base, MakeModel(lines, r.base_rows, 3));
  base.exported = {1, false, 1, absl::ToUnixMillis(absl::Now())};
  PS_RETURN_IF_ERROR(worker::WriteVersion(export_dir, base));
  worker::SavedModel delta = base;
  base.tables.clear();
  std::mt19937_64 rng(4);
  std::normal_distribution<float> value(0.0f, 0.05f);
  for (worker::TableValues& t : delta.tables) {
    if (t.spec.kind != TableKind::kSparse) continue;
    const size_t keep = static_cast<size_t>(
        static_cast<double>(t.ids.size()) * static_cast<double>(options.delta_rows) /
        static_cast<double>(r.base_rows));
    t.ids.resize(keep);
    t.rows.resize(keep * t.spec.dim);
    for (float& v : t.rows) v = value(rng);
    r.rows += keep;
  }
  delta.step = 4;

  worker::ServeOptions so;
  so.model_dir = export_dir;
  so.threads = options.threads;
  so.poll = absl::Milliseconds(200);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ModelServer> server, worker::ModelServer::Start(so));
  (void)RunRequests(server->port(), lines, 1, 0.5, nullptr);  // warm up
  std::atomic<bool> done{false};
  std::thread client([&] { r.requests = RunRequests(server->port(), lines, 1, 0, &done); });
  const Clock::time_point t0 = Clock::now();
  delta.exported = {2, true, 1, absl::ToUnixMillis(absl::Now())};
  absl::Status written = worker::WriteVersion(export_dir, delta);
  r.write_seconds = SecondsSince(t0);
  const std::string want = worker::VersionName(2);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (written.ok() && server->current()->model->version() != want && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  r.served_after_seconds = SecondsSince(t0);
  r.served = server->current()->model->version() == want;
  absl::SleepFor(absl::Milliseconds(500));  // and a little after the swap
  done = true;
  client.join();
  server->Stop();
  PS_RETURN_IF_ERROR(written);
  return r;
}

}  // namespace

absl::Status RunServeBench(const ServeBenchOptions& options) {
  if (options.rows < 1000 || options.threads < 1 || options.batch < 1 || !(options.seconds > 0)) {
    return absl::InvalidArgumentError("serve bench: --serve_rows >= 1000, threads, batch, seconds > 0");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/pstrain_serve_bench.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return absl::InternalError(absl::StrCat("mkdtemp ", dir));
  RemoveDirOnExit cleanup{dir};

  worker::SyntheticOptions world;
  world.rows = kRequestRows;
  PS_RETURN_IF_ERROR(worker::WriteSynthetic(world, dir + "/rows.tsv").status());
  std::vector<std::string> lines;
  {
    std::ifstream in(dir + "/rows.tsv");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const std::string model_dir = dir + "/model";
  Clock::time_point t0 = Clock::now();
  PS_ASSIGN_OR_RETURN(worker::SavedModel v1, MakeModel(lines, options.rows, 1));
  PS_RETURN_IF_ERROR(worker::WriteModel(model_dir, v1));
  spdlog::info("serve: wrote version 1 ({} rows) in {:.1f}s", options.rows, SecondsSince(t0));

  worker::ServeOptions so;
  so.model_dir = model_dir;
  so.threads = options.threads;
  so.poll = absl::Milliseconds(200);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ModelServer> server,
                      worker::ModelServer::Start(so));
  const std::string first_version = server->current()->model->version();

  auto print = [&](const char* phase, int rows_per_request, PhaseResult& r) {
    JsonLine line;
    line.Add("bench", "serve")
        .Add("phase", phase)
        .Add("model", "dlrm")
        .Add("model_rows", options.rows)
        .Add("threads", options.threads)
        .Add("rows_per_request", rows_per_request)
        .Add("requests", r.requests)
        .Add("failures", r.failures)
        .Add("p50_us", r.latencies.Quantile(0.5))
        .Add("p99_us", r.latencies.Quantile(0.99))
        .Add("max_us", r.latencies.Quantile(1.0))
        .Add("rows_per_sec", r.rows / r.seconds)
        .Add("rows_per_cpu_sec", r.cpu_seconds > 0 ? r.rows / r.cpu_seconds : 0.0)
        .Add("seconds", r.seconds);
    PrintResult(line);
  };
  (void)RunRequests(server->port(), lines, 1, 0.5, nullptr);  // warm up
  PhaseResult latency = RunRequests(server->port(), lines, 1, options.seconds, nullptr);
  print("latency", 1, latency);
  PhaseResult batch = RunRequests(server->port(), lines, options.batch, options.seconds, nullptr);
  print("batch", options.batch, batch);

  // A new version under load: written beside the served one, swapped into
  // place, loaded by the watcher.
  std::atomic<bool> done{false};
  PhaseResult reload;
  std::thread client([&] { reload = RunRequests(server->port(), lines, 1, 0, &done); });
  absl::Status written;
  t0 = Clock::now();
  {
    absl::StatusOr<worker::SavedModel> v2 = MakeModel(lines, options.rows, 2);
    written = v2.ok() ? worker::ReplaceModel(model_dir, *v2) : v2.status();
  }
  const double write_seconds = SecondsSince(t0);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (written.ok() && server->current()->model->version() == first_version &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const double swap_seconds = SecondsSince(t0);
  absl::SleepFor(absl::Milliseconds(500));  // and a little after the swap
  done = true;
  client.join();
  PS_RETURN_IF_ERROR(written);
  print("reload", 1, reload);
  const bool swapped = server->current()->model->version() != first_version;
  server->Stop();
  PS_ASSIGN_OR_RETURN(DeltaResult delta, RunDelta(options, lines, dir + "/export"));
  print("delta", 1, delta.requests);
  JsonLine summary;
  summary.Add("bench", "serve")
      .Add("summary", true)
      .Add("p50_us_1row", latency.latencies.Quantile(0.5))
      .Add("p99_us_1row", latency.latencies.Quantile(0.99))
      .Add("rows_per_sec_batch", batch.rows / batch.seconds)
      .Add("batch", options.batch)
      .Add("reload_rows", options.rows)
      .Add("reload_write_seconds", write_seconds)
      .Add("reload_served_after_seconds", swap_seconds)
      .Add("reload_new_version_served", swapped)
      .Add("reload_failures", reload.failures)
      .Add("reload_p99_us", reload.latencies.Quantile(0.99))
      .Add("delta_rows", delta.rows)
      .Add("delta_base_rows", delta.base_rows)
      .Add("delta_write_seconds", delta.write_seconds)
      .Add("delta_served_after_seconds", delta.served_after_seconds)
      .Add("delta_served", delta.served)
      .Add("delta_failures", delta.requests.failures)
      .Add("delta_p99_us", delta.requests.latencies.Quantile(0.99));
  PrintResult(summary);
  if (!swapped) return absl::InternalError("serve bench: the new version was not served within 60 s");
  if (!delta.served) return absl::InternalError("serve bench: the delta was not served within 60 s");
  return absl::OkStatus();
}

}  // namespace pstrain::bench
