#include "bench/pipeline_bench.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/inproc_transport.h"
#include "common/json_line.h"
#include "common/process.h"
#include "common/status.h"
#include "data/synthetic.h"
#include "server/coordinator/coordinator.h"
#include "server/ps/parameter_server.h"
#include "worker/pipeline/pipeline_worker.h"
#include "worker/pipeline/schedule.h"

namespace pstrain::bench {
namespace {

struct Flag {
  std::string value;
  const char* help;
};

using Flags = std::map<std::string, Flag>;

Flags DefaultFlags() {
  return {
      {"stages", {"2", "pipeline stages (workers), P"}},
      {"microbatches", {"8", "micro-batches per batch, M"}},
      {"schedule", {"1f1b", "gpipe | 1f1b"}},
      {"replicas", {"1", "pipelines side by side"}},
      {"tower_layers", {"24", "deep_tower hidden layers"}},
      {"tower_width", {"1024", "deep_tower layer width"}},
      {"batch_size", {"256", "rows per step"}},
      {"steps", {"10", "training steps (the first, which allocates, is not in the bubble)"}},
      {"servers", {"1", "parameter servers"}},
      {"stage_layers", {"", "tower layer ranges per stage, e.g. 0-12,13-24 (default: balanced)"}},
      {"log_level", {"warn", "logs on stderr: trace | debug | info | warn | error"}},
  };
}

absl::Status ParseFlags(int argc, char** argv, Flags* flags, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "pipeline") continue;
    if (a == "--help" || a == "-h") {
      *help = true;
      continue;
    }
    if (!absl::StartsWith(a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    }
    size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto it = flags->find(name);
    if (it == flags->end())
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs a value (--", name, "=...)"));
    }
    it->second.value = a.substr(eq + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Positive(const Flags& flags, const std::string& name) {
  int v = 0;
  if (!absl::SimpleAtoi(flags.at(name).value, &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a positive integer"));
  }
  return v;
}

// A coordinator, servers and the pipeline's workers in this process.
absl::StatusOr<worker::PipelineStageResult> RunJob(const worker::WorkerOptions& base, int servers) {
  const int workers = base.pipeline.stages * base.pipeline.replicas;
  InProcNetwork net;
  server::CoordinatorOptions co;
  co.bind = "coord";
  co.num_servers = servers;
  co.num_workers = workers;
  co.heartbeat_timeout = absl::Minutes(5);
  PS_ASSIGN_OR_RETURN(auto coordinator,
                      server::Coordinator::Create(co, std::make_unique<InProcTransport>(&net)));
  std::vector<std::unique_ptr<server::ParameterServer>> ps;
  for (int s = 0; s < servers; ++s) {
    server::ServerOptions so;
    so.coordinator = "coord";
    so.bind = absl::StrCat("server", s);
    so.rank = s;
    PS_ASSIGN_OR_RETURN(
        auto p, server::ParameterServer::Create(so, std::make_unique<InProcTransport>(&net)));
    ps.push_back(std::move(p));
  }
  std::vector<std::thread> server_threads;
  for (auto& p : ps) server_threads.emplace_back([s = p.get()] { (void)s->Run(); });
  std::vector<absl::Status> status(workers);
  std::vector<worker::PipelineStageResult> results(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      worker::WorkerOptions o = base;
      o.coordinator = "coord";
      o.bind = absl::StrCat("worker", w);
      o.rank = w;
      worker::WorkerRuntime rt;
      rt.make_transport = [&net] { return std::make_unique<InProcTransport>(&net); };
      rt.on_shutdown = [](const absl::Status& why) {
        spdlog::error("the coordinator stopped the job: {}", why.ToString());
      };
      rt.stage_result = &results[w];
      rt.print_result = false;
      status[w] = worker::RunPipelineWorker(o, rt);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& p : ps) p->RequestStop();
  for (auto& t : server_threads) t.join();
  coordinator->RequestStop();
  for (int w = 0; w < workers; ++w) {
    if (!status[w].ok()) return Annotate(status[w], absl::StrCat("worker ", w));
  }
  return results[0];
}

absl::Status Run(const Flags& flags) {
  worker::WorkerOptions o;
  o.mode = TrainMode::kPipeline;
  worker::PipelineOptions& p = o.pipeline;
  PS_ASSIGN_OR_RETURN(p.stages, Positive(flags, "stages"));
  PS_ASSIGN_OR_RETURN(p.microbatches, Positive(flags, "microbatches"));
  PS_ASSIGN_OR_RETURN(p.replicas, Positive(flags, "replicas"));
  PS_ASSIGN_OR_RETURN(p.schedule, worker::ParseSchedule(flags.at("schedule").value));
  p.stage_layers = flags.at("stage_layers").value;
  PS_ASSIGN_OR_RETURN(int layers, Positive(flags, "tower_layers"));
  PS_ASSIGN_OR_RETURN(int width, Positive(flags, "tower_width"));
  PS_ASSIGN_OR_RETURN(int steps, Positive(flags, "steps"));
  PS_ASSIGN_OR_RETURN(int servers, Positive(flags, "servers"));
  worker::TrainOptions& t = o.train;
  PS_ASSIGN_OR_RETURN(t.batch_size, Positive(flags, "batch_size"));
  t.model.name = "deep_tower";
  t.model.deep_mlp.assign(layers, width);
  t.model.device = "cpu";
  t.model.dense_optimizer.lr = 0.01f;
  t.max_steps = steps;
  t.log_every = absl::Hours(1);

  char tmpl[] = "/tmp/pstrain-pipeline-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = tmpl;
  worker::SyntheticOptions w;
  w.rows = static_cast<int64_t>(steps) * t.batch_size * p.replicas;
  auto written = worker::WriteSynthetic(w, dir + "/train.tsv");
  if (!written.ok()) {
    std::filesystem::remove_all(dir);
    return written.status();
  }
  t.train_data = {dir + "/train.tsv"};
  absl::StatusOr<worker::PipelineStageResult> r = RunJob(o, servers);
  std::filesystem::remove_all(dir);
  PS_RETURN_IF_ERROR(r.status());

  std::vector<std::string> busy, wait;
  for (const auto& rep : r->reports) {
    busy.push_back(absl::StrFormat("%.3f", rep.busy_seconds));
    wait.push_back(absl::StrFormat("%.3f", rep.wait_seconds));
  }
  const double seconds = r->train.train_seconds;
  JsonLine line;
  line.Add("bench", "pipeline")
      .Add("stages", p.stages)
      .Add("microbatches", p.microbatches)
      .Add("schedule", worker::ScheduleName(p.schedule))
      .Add("bubble", r->bubble)
      .Add("ideal_bubble", worker::IdealBubble(p.stages, p.microbatches))
      .Add("samples_per_sec", seconds > 0 ? p.replicas * r->train.samples / seconds : 0.0)
      .Add("bubble_wall", r->bubble_wall)
      .Add("replicas", p.replicas)
      .Add("tower_layers", layers)
      .Add("tower_width", width)
      .Add("batch_size", t.batch_size)
      .Add("steps", r->train.steps)
      .Add("seconds", seconds)
      .AddRaw("stage_busy_seconds", absl::StrCat("[", absl::StrJoin(busy, ","), "]"))
      .AddRaw("stage_wait_seconds", absl::StrCat("[", absl::StrJoin(wait, ","), "]"))
      .Add("cores", static_cast<int64_t>(std::thread::hardware_concurrency()));
  std::printf("%s\n", line.str().c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

int RunPipelineBench(int argc, char** argv) {
  Flags flags = DefaultFlags();
  bool help = false;
  if (absl::Status st = ParseFlags(argc, argv, &flags, &help); !st.ok()) {
    std::fprintf(stderr, "pstrain_bench pipeline: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  if (help) {
    std::printf(
        "pstrain_bench pipeline [--flags]\n"
        "deep_tower trained through a pipeline (coordinator, server and stage workers as\n"
        "threads of this process); prints {bench,stages,microbatches,schedule,bubble,\n"
        "ideal_bubble,samples_per_sec,bubble_wall,...}. bubble: the steps replayed on\n"
        "dedicated cores from the measured CPU time of every op; bubble_wall: the share of\n"
        "each stage's wall time spent waiting for a neighbour (here stages share cores).\n");
    for (const auto& [name, f] : flags) {
      std::printf("  --%s (default '%s'): %s\n", name.c_str(), f.value.c_str(), f.help);
    }
    return 0;
  }
  InitLogging("bench", flags.at("log_level").value);
  absl::Status st = Run(flags);
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace pstrain::bench
