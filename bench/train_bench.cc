#include "bench/train_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <httplib.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/bench_cluster.h"
#include "bench/bench_util.h"
#include "common/file_util.h"
#include "common/http/http_server.h"
#include "common/metrics/metrics_http.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "common/optim/initializer.h"
#include "common/status.h"
#include "data/reader.h"
#include "data/schema_file.h"
#include "data/synthetic.h"
#include "model/models/model.h"
#include "worker/train_metrics.h"
#include "worker/trainer.h"
#include "worker/worker_session.h"

namespace pstrain::bench {
namespace {

worker::ModelOptions ModelFor(const TrainBenchOptions& o) {
  worker::ModelOptions m;  // the model's defaults (dlrm: 13 dense, 26 sparse, dim 16)
  m.name = o.model;
  m.graph = o.model_graph;
  m.device = o.device;
  return m;
}

worker::Schema SchemaFor(const worker::ModelOptions& m) {
  worker::Schema s;
  s.num_dense = m.num_dense;
  s.num_sparse = m.num_sparse;
  return s;
}

worker::SyntheticOptions WorldFor(const worker::ModelOptions& m, int64_t rows) {
  worker::SyntheticOptions w;
  w.rows = rows;
  w.num_dense = m.num_dense;
  w.num_sparse = m.num_sparse;
  return w;
}

// A free TCP port on 127.0.0.1 (bound and released: another process could
// take it before it is used, which the bench accepts).
absl::StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  if (port <= 0) return absl::UnavailableError("no free port on 127.0.0.1");
  return port;
}

// The port of endpoint `k` for options.metrics_port (> 0: base + k; -1: free).
absl::StatusOr<int> MetricsPort(const TrainBenchOptions& o, int k) {
  if (o.metrics_port > 0) return o.metrics_port + k;
  return FreePort();
}

// GETs http://127.0.0.1:PORT/metrics for every port, every `interval`, on
// its own thread (one kept-alive connection per endpoint, as Prometheus
// does), until destroyed.
class MetricsScraper {
 public:
  MetricsScraper(std::vector<int> ports, double interval_seconds)
      : ports_(std::move(ports)), interval_(absl::Seconds(interval_seconds)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~MetricsScraper() {
    stop_.Notify();
    thread_.join();
  }
  void Fill(TrainBenchResult* r) {
    absl::MutexLock lock(&mu_);
    r->scrapes = scrapes_;
    r->scrape_failures = failures_;
    r->scrape_bytes = last_bytes_;
    r->scrape_seconds = get_seconds_;
  }

 private:
  void Run() {
    std::vector<std::unique_ptr<httplib::Client>> clients;
    for (int port : ports_) {
      clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
      clients.back()->set_keep_alive(true);
      clients.back()->set_read_timeout(5, 0);
    }
    do {
      int64_t bytes = 0, ok = 0, failed = 0;
      const int64_t t0 = metrics::MonotonicNanos();
      for (auto& c : clients) {
        auto res = c->Get("/metrics");
        if (res && res->status == 200) {
          ++ok;
          bytes += static_cast<int64_t>(res->body.size());
        } else {
          ++failed;
        }
      }
      const double seconds = static_cast<double>(metrics::MonotonicNanos() - t0) * 1e-9;
      absl::MutexLock lock(&mu_);
      get_seconds_ += seconds;
      scrapes_ += ok;
      failures_ += failed;
      last_bytes_ = bytes;
    } while (!stop_.WaitForNotificationWithTimeout(interval_));
  }

  std::vector<int> ports_;
  absl::Duration interval_;
  absl::Notification stop_;
  absl::Mutex mu_;
  int64_t scrapes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  double get_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// CPU seconds of every thread of this process, sampled every 50 ms from
// /proc/self/task/*/stat while alive (a thread that ends keeps its last
// sample), summed by part of the job (TrainBenchResult::cpu_by_part); and
// the times each thread blocked and was woken again (its voluntary context
// switches, /proc/self/task/*/status, read at the start and the end only:
// the wake-ups of a thread that ends before the end are not counted).
class ThreadCpuSampler {
 public:
  explicit ThreadCpuSampler(pid_t trainer) : trainer_(trainer) {
    Sample(/*switches=*/true);
    for (auto& [tid, t] : threads_) {
      t.first = t.last;
      t.first_switches = t.last_switches;
    }
    thread_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(50))) Sample(false);
    });
  }
  ~ThreadCpuSampler() { Stop(); }

  std::vector<std::pair<std::string, double>> Stop() {
    if (thread_.joinable()) {
      stop_.Notify();
      thread_.join();
      Sample(/*switches=*/true);
    }
    std::map<std::string, double> parts;
    for (const auto& [tid, t] : threads_) parts[PartOf(tid, t.comm)] += t.last - t.first;
    return {parts.begin(), parts.end()};
  }
  // After Stop(): the wake-ups by part of the job.
  std::vector<std::pair<std::string, double>> Wakeups() const {
    std::map<std::string, double> parts;
    for (const auto& [tid, t] : threads_) {
      parts[PartOf(tid, t.comm)] += static_cast<double>(t.last_switches - t.first_switches);
    }
    return {parts.begin(), parts.end()};
  }

 private:
  struct Thread {
    std::string comm;
    double first = 0, last = 0;
    int64_t first_switches = 0, last_switches = 0;
  };

  std::string PartOf(pid_t tid, const std::string& comm) const {
    if (tid == trainer_) return "trainer";
    if (comm == "data-reader") return "reader";
    // A server's requests are handled on its transport's loop ("server0-net").
    if (comm == "ps-server" || absl::StartsWith(comm, "ps-shard") ||
        (absl::StartsWith(comm, "server") && absl::EndsWith(comm, "-net"))) {
      return "server";
    }
    if (absl::StartsWith(comm, "1/ZMQbg/IO")) return "server_io";
    if (absl::StartsWith(comm, "2/ZMQbg/IO")) return "worker_io";
    if (comm == "worker-net") return "worker_net";
    if (absl::StartsWith(comm, "coord") || absl::StartsWith(comm, "3/ZMQbg")) return "coordinator";
    return "other";
  }

  void Sample(bool switches) {
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(e.path().filename().c_str()));
      absl::StatusOr<std::string> read = ReadFileToString(e.path() / "stat");
      if (!read.ok()) continue;  // the thread ended meanwhile
      const std::string& stat = *read;
      const size_t open = stat.find('('), close = stat.rfind(')');
      if (open == std::string::npos || close == std::string::npos) continue;
      // After ") ": state, then fields 4..13; utime and stime are 14 and 15.
      unsigned long utime = 0, stime = 0;
      if (std::sscanf(stat.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                      &utime, &stime) != 2) {
        continue;
      }
      Thread& t = threads_[tid];
      t.comm = stat.substr(open + 1, close - open - 1);
      t.last = static_cast<double>(utime + stime) / tick;
      if (!switches) continue;
      absl::StatusOr<std::string> status = ReadFileToString(e.path() / "status");
      constexpr std::string_view kKey = "\nvoluntary_ctxt_switches:";
      const size_t at = status.ok() ? status->find(kKey) : std::string::npos;
      if (at != std::string::npos) {
        t.last_switches = std::strtoll(status->c_str() + at + kKey.size(), nullptr, 10);
      }
    }
  }

  const pid_t trainer_;
  std::map<pid_t, Thread> threads_;  // new threads start at 0
  absl::Notification stop_;
  std::thread thread_;  // last: starts once the rest is built
};

// Sends stdout to stderr while alive: the Trainer prints a human "RESULT"
// line on stdout, which must not mix with the bench's JSON lines.
class StdoutToStderr {
 public:
  StdoutToStderr() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    if (saved_ >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutToStderr() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      dup2(saved_, STDOUT_FILENO);
      close(saved_);
    }
  }

 private:
  int saved_ = -1;
};

// Runs the Trainer as worker 0 of the job at `coordinator`, a mode body on
// a WorkerSession (without recovery: the bench's cluster takes no
// checkpoints). With
// options.metrics_port it serves the worker's /metrics (TrainMetrics fed
// by the trainer and by heartbeats, as in a worker process) and scrapes it
// and `server_metrics_ports` while training.
absl::StatusOr<worker::TrainResult> TrainAgainst(const std::string& coordinator,
                                                 worker::TrainOptions train,
                                                 const TrainBenchOptions& options,
                                                 const std::vector<int>& server_metrics_ports,
                                                 TrainBenchResult* scraped) {
  StackOptions stack = options.stack;
  stack.pin_nodes = false;  // the trainer's threads are not pinned: nor is its node
  metrics::Registry registry;
  std::unique_ptr<worker::TrainMetrics> train_metrics;
  std::unique_ptr<http::HttpServer> http;
  std::vector<int> scrape_ports = server_metrics_ports;
  if (options.metrics_port != 0) {
    train_metrics = std::make_unique<worker::TrainMetrics>(&registry);
    PS_ASSIGN_OR_RETURN(int port, MetricsPort(options, 1));
    PS_ASSIGN_OR_RETURN(http, metrics::StartMetricsServer(&registry, "127.0.0.1", port));
    scrape_ports.push_back(http->port());
    train.train_metrics = train_metrics.get();
  }
  worker::WorkerSessionOptions so;
  so.coordinator = coordinator;
  so.bind = "tcp://127.0.0.1:0";
  so.rank = 0;
  so.cluster_timeout = absl::Seconds(60);  // the bench's cluster is up already
  so.tables_timeout = absl::Seconds(60);
  so.train_metrics = train_metrics.get();
  so.make_transport = [stack] { return MakeTransport("worker", stack, WorkerCpus(stack)); };
  so.kv.push_partition_bytes = stack.push_partition_bytes;
  so.kv.pull_f16 = stack.pull_f16;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerSession> session,
                      worker::WorkerSession::Start(std::move(so)));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(train.model));
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout, session->DefineTables(model->tables()));
  session->Connect(std::move(layout));
  absl::StatusOr<worker::TrainResult> result;
  {
    StdoutToStderr redirect;
    std::unique_ptr<MetricsScraper> scraper;
    if (!scrape_ports.empty()) {
      scraper = std::make_unique<MetricsScraper>(scrape_ports, options.scrape_seconds);
    }
    worker::Trainer trainer(train, model.get(), session->kv(), session->coordinator(),
                            session->rank(), session->view().num_workers);
    ThreadCpuSampler threads(static_cast<pid_t>(syscall(SYS_gettid)));
    const double cpu0 = metrics::ReadProcessUsage().cpu_seconds;
    result = trainer.Run();
    scraped->cpu_seconds = metrics::ReadProcessUsage().cpu_seconds - cpu0;
    scraped->cpu_by_part = threads.Stop();
    scraped->wakeups_by_part = threads.Wakeups();
    if (scraper != nullptr) scraper->Fill(scraped);
  }
  absl::Status done = session->Finish();
  if (result.ok() && !done.ok()) return done;
  return result;
}

}  // namespace

absl::Status BindLocalBatch(const worker::Model& model, const std::vector<const float*>& dense,
                            LocalBatch* b) {
  const auto& tables = model.tables();
  model.Plan(*b->batch, &b->plan);
  b->rows.resize(tables.size());
  b->grads.resize(tables.size());
  b->params.tables.assign(tables.size(), nullptr);
  b->grad_refs.tables.assign(tables.size(), nullptr);
  for (const TableSpec& t : tables) {
    if (t.kind == TableKind::kDense) {
      b->params.tables[t.id] = dense[t.id];
      b->grads[t.id].resize(t.size);
    }
  }
  const auto& sparse = model.sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) {
    const TableSpec& t = tables[sparse[k]];
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(t.init, t.id));
    const auto& ids = b->plan.lookups[k].unique_ids;
    b->rows[t.id].resize(ids.size() * t.dim);
    for (size_t i = 0; i < ids.size(); ++i) init.FillRow(ids[i], &b->rows[t.id][i * t.dim], t.dim);
    b->params.tables[t.id] = b->rows[t.id].data();
    b->grads[t.id].resize(ids.size() * t.dim);
  }
  for (const TableSpec& t : tables) b->grad_refs.tables[t.id] = b->grads[t.id].data();
  return absl::OkStatus();
}

namespace {

// options.train_data's schema (options.schema_file) and the model over its
// columns.
absl::StatusOr<TrainInput> InputFromFiles(const TrainBenchOptions& options) {
  if (options.schema_file.empty()) {
    return absl::InvalidArgumentError("--train_data needs --schema: the file that reads it");
  }
  PS_ASSIGN_OR_RETURN(worker::SchemaFile file,
                      worker::LoadSchemaFile(options.schema_file, options.train_data, 0));
  TrainInput in;
  in.patterns = options.train_data;
  in.schema = file.schema;
  in.model = ModelFor(options);
  if (file.embedding_dim > 0) in.model.embedding_dim = file.embedding_dim;
  worker::SetSchemaColumns(file.schema, &in.model);
  return in;
}

// The local bench's batches from options.train_data read with its schema:
// its first rows, batch_size at a time; sets mo to its model.
absl::StatusOr<std::vector<std::shared_ptr<const worker::Batch>>> BatchesFromFiles(
    const TrainBenchOptions& options, worker::ModelOptions* mo) {
  PS_ASSIGN_OR_RETURN(TrainInput in, InputFromFiles(options));
  *mo = in.model;
  worker::ReaderOptions ro;
  ro.patterns = in.patterns;
  ro.schema = in.schema;
  ro.batch_size = options.batch_size;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::DataReader> reader, worker::DataReader::Open(ro));
  std::vector<std::shared_ptr<const worker::Batch>> out;
  while (static_cast<int>(out.size()) < std::max(1, options.local_batches)) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const worker::Batch> b, reader->Next());
    if (!b || b->size < options.batch_size) break;
    out.push_back(std::move(b));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--train_data: fewer than --batch_size=",
                                                   options.batch_size, " rows"));
  }
  return out;
}

}  // namespace

absl::StatusOr<TrainBenchResult> RunTrainLocal(const TrainBenchOptions& options) {
  worker::ModelOptions mo = ModelFor(options);
  std::vector<std::shared_ptr<const worker::Batch>> from_files;
  if (!options.train_data.empty()) {
    PS_ASSIGN_OR_RETURN(from_files, BatchesFromFiles(options, &mo));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::CreateModel(mo));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::SyntheticWorld> world,
                      worker::SyntheticWorld::Create(WorldFor(mo, 0)));
  const auto& tables = model->tables();
  std::vector<std::vector<float>> dense(tables.size());
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense) continue;
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(t.init, t.id));
    dense[t.id].resize(t.size);
    init.FillRange(0, dense[t.id].data(), t.size);
  }
  std::vector<const float*> dense_refs(tables.size(), nullptr);
  for (const TableSpec& t : tables) dense_refs[t.id] = dense[t.id].data();
  std::vector<LocalBatch> batches(from_files.empty() ? std::max(1, options.local_batches)
                                                     : from_files.size());
  for (size_t k = 0; k < batches.size(); ++k) {
    if (!from_files.empty()) {
      batches[k].batch = from_files[k];
    } else {
      PS_ASSIGN_OR_RETURN(batches[k].batch,
                          worker::GenerateBatch(*world, static_cast<int64_t>(k) * options.batch_size,
                                                options.batch_size, SchemaFor(mo)));
    }
    PS_RETURN_IF_ERROR(BindLocalBatch(*model, dense_refs, &batches[k]));
  }
  auto step = [&](LocalBatch& b) -> absl::StatusOr<worker::StepOutput> {
    return model->TrainStep(*b.batch, b.plan, b.params, &b.grad_refs);
  };
  for (LocalBatch& b : batches) PS_RETURN_IF_ERROR(step(b).status());  // warm-up
  // With metrics: this process serves /metrics, its TrainMetrics fed every
  // step (and sampled each second, as a worker's heartbeat does), scraped.
  metrics::Registry registry;
  std::unique_ptr<worker::TrainMetrics> train_metrics;
  std::unique_ptr<http::HttpServer> http;
  std::unique_ptr<MetricsScraper> scraper;
  if (options.metrics_port != 0) {
    train_metrics = std::make_unique<worker::TrainMetrics>(&registry);
    PS_ASSIGN_OR_RETURN(int port, MetricsPort(options, 0));
    PS_ASSIGN_OR_RETURN(http, metrics::StartMetricsServer(&registry, "127.0.0.1", port));
    scraper = std::make_unique<MetricsScraper>(std::vector<int>{http->port()}, options.scrape_seconds);
  }
  TrainBenchResult r;
  const double cpu0 = metrics::ReadProcessUsage().cpu_seconds;
  const auto start = Clock::now();
  auto sampled = start;
  for (size_t k = 0; SecondsSince(start) < options.seconds; ++k) {
    const auto t0 = Clock::now();
    PS_ASSIGN_OR_RETURN(worker::StepOutput out, step(batches[k % batches.size()]));
    r.samples += out.num_samples;
    ++r.steps;
    if (train_metrics != nullptr) {
      r.compute_seconds += SecondsSince(t0);
      train_metrics->OnStep(worker::StepReport{r.steps, out.num_samples, out.loss_sum,
                                               r.compute_seconds, 0, 0, 0, 0});
      if (SecondsSince(sampled) >= 1.0) {
        proto::Heartbeat hb;
        train_metrics->FillHeartbeat(&hb);
        sampled = Clock::now();
      }
    }
  }
  r.seconds = SecondsSince(start);
  r.cpu_seconds = metrics::ReadProcessUsage().cpu_seconds - cpu0;
  r.samples_per_sec = r.samples / r.seconds;
  if (scraper != nullptr) scraper->Fill(&r);
  return r;
}

absl::StatusOr<TrainInput> PrepareTrainInput(const TrainBenchOptions& options, std::string* dir) {
  if (!options.train_data.empty()) return InputFromFiles(options);
  std::string base = options.temp_dir;
  if (base.empty()) {
    const char* env = std::getenv("TMPDIR");
    base = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  std::string dir_template = absl::StrCat(base, "/pstrain_bench.XXXXXX");
  if (mkdtemp(dir_template.data()) == nullptr) {
    return ErrnoToStatus(errno, absl::StrCat("mkdtemp ", dir_template));
  }
  *dir = dir_template;
  const std::string path = *dir + "/train.tsv";
  TrainInput in;
  in.model = ModelFor(options);
  in.schema = SchemaFor(in.model);
  in.patterns = {path};
  PS_ASSIGN_OR_RETURN(worker::SyntheticReport report,
                      worker::WriteSynthetic(WorldFor(in.model, options.train_rows), path));
  spdlog::info("train: wrote {} rows ({:.1f} MB) in {:.1f}s", report.rows, report.bytes / 1e6,
               report.seconds);
  return in;
}

absl::StatusOr<TrainBenchResult> RunTrainPs(const TrainBenchOptions& options) {
  std::string dir;
  absl::StatusOr<TrainInput> input = PrepareTrainInput(options, &dir);
  RemoveDirOnExit cleanup{dir};
  PS_RETURN_IF_ERROR(input.status());

  BenchClusterOptions co;
  co.servers = options.servers;
  co.workers = 1;
  co.local_workers = 0;  // the Trainer below joins as worker 0
  co.consistency = options.consistency;
  co.stack = options.stack;
  co.stack.pin_nodes = false;  // see above
  if (options.metrics_port != 0) {
    PS_ASSIGN_OR_RETURN(int port, MetricsPort(options, 0));
    co.server_metrics_ports.push_back(port);
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(co));

  worker::TrainOptions train;
  train.model = input->model;
  train.schema = input->schema;
  train.train_data = input->patterns;
  train.batch_size = options.batch_size;
  train.epochs = 1;
  train.push_with_pull = options.push_with_pull;
  train.log_every = absl::Hours(1);
  TrainBenchResult r;
  absl::StatusOr<worker::TrainResult> tr = TrainAgainst(
      cluster->coordinator_endpoint(), train, options, co.server_metrics_ports, &r);
  // On failure the worker may not have reported done: the cluster's
  // destructor stops everything instead.
  PS_RETURN_IF_ERROR(tr.status());
  PS_RETURN_IF_ERROR(cluster->Finish());
  r.steps = tr->steps;
  r.samples = tr->samples;
  r.seconds = tr->train_seconds;
  r.samples_per_sec = tr->train_seconds > 0 ? tr->samples / tr->train_seconds : 0;
  r.compute_seconds = tr->compute_seconds;
  r.wait_seconds = tr->wait_seconds;
  r.data_seconds = tr->data_seconds;
  r.reader_rows_per_sec = tr->reader_rows_per_sec;
  return r;
}

}  // namespace pstrain::bench
