// pstrain train: the whole job in one process — a coordinator, one
// parameter server and one worker as threads over loopback. For training on
// one machine without a cluster, and as the single-process reference that
// distributed runs are compared with.
#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/process.h"
#include "common/security/security_flags.h"
#include "common/zmq_transport.h"
#include "common/status.h"
#include "job/flags/job_flag.h"
#include "launcher/commands.h"
#include "server/coordinator/coordinator.h"
#include "server/ps/parameter_server.h"
#include "worker/worker_app.h"
#include "worker/flags/worker_flags.h"

namespace pstrain::launcher {

namespace {

constexpr char kTrainUsage[] =
    "pstrain train --train_data=FILES [--eval_data=FILES] [worker flags]\n"
    "Trains in one process: coordinator, one server and one worker as threads.";

// The coordinator and the server of the one-process job, run as threads.
struct LocalServices {
  std::unique_ptr<server::Coordinator> coordinator;
  std::unique_ptr<server::ParameterServer> server;
};

absl::StatusOr<LocalServices> CreateServices(const CurveKeys& keys) {
  LocalServices s;
  server::CoordinatorOptions co;
  co.bind = "tcp://127.0.0.1:0";
  co.num_servers = 1;
  co.num_workers = 1;
  co.consistency = proto::Consistency::kBsp;  // one worker: the same as any model, exactly
  ZmqTransportOptions t;
  t.name = "coordinator";
  t.curve = keys;
  PS_ASSIGN_OR_RETURN(s.coordinator, server::Coordinator::Create(co, std::make_unique<ZmqTransport>(t)));
  server::ServerOptions so;
  so.coordinator = s.coordinator->endpoint();
  so.bind = "tcp://127.0.0.1:0";
  t.name = "server";
  PS_ASSIGN_OR_RETURN(s.server, server::ParameterServer::Create(so, std::make_unique<ZmqTransport>(t)));
  return s;
}

}  // namespace

std::string TrainHelp() {
  // The worker's flags are this process's: list them like pstrain_worker.
  return FlagsHelp(kTrainUsage);
}

absl::Status RunTrain(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {"pstrain train"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  ParseFlagsWithEnv(static_cast<int>(argv.size()), argv.data(), kTrainUsage);
  InitLogging("train", worker::LogLevelFlag());
  if (absl::Status st = PinProcess(worker::CpusFlag()); !st.ok()) return UsageError(st.ToString());
  // A job file (--job) fills the worker's flags not given here.
  if (auto job = job::TakeJob(static_cast<int>(argv.size()), argv.data(), job::kWorker, {}); !job.ok()) {
    return UsageError(job.status().message());
  }
  absl::StatusOr<worker::WorkerOptions> options = worker::WorkerOptionsFromFlags();
  if (!options.ok()) return UsageError(options.status().message());
  absl::StatusOr<CurveKeys> keys = CurveKeysFromFlags();
  if (!keys.ok()) return UsageError(keys.status().ToString());
  options->curve = *keys;
  PS_ASSIGN_OR_RETURN(LocalServices services, CreateServices(*keys));
  absl::Status server_status, coordinator_status;
  std::thread server_thread([&] { server_status = services.server->Run(); });
  std::thread coordinator_thread([&] { coordinator_status = services.coordinator->Run(); });
  options->coordinator = services.coordinator->endpoint();
  options->bind = "tcp://127.0.0.1:0";
  absl::Status st = worker::RunWorker(*options, worker::ProcessRuntime());
  if (!st.ok()) {
    services.coordinator->RequestStop();
    services.server->RequestStop();
  }
  server_thread.join();
  coordinator_thread.join();
  PS_RETURN_IF_ERROR(st);
  PS_RETURN_IF_ERROR(Annotate(server_status, "server"));
  return Annotate(coordinator_status, "coordinator");
}

}  // namespace pstrain::launcher
