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
#include "launcher/commands.h"
#include "server/coordinator/coordinator.h"
#include "server/ps/parameter_server.h"
#include "worker/worker_app.h"
#include "worker/flags/worker_flags.h"

namespace pstrain::launcher {

int RunTrain(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {"pstrain train"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  ParseFlagsWithEnv(static_cast<int>(argv.size()), argv.data(),
                    "pstrain train --train_data=FILES [--eval_data=FILES] [worker flags]\n"
                    "Trains in one process: coordinator, one server and one worker as threads.");
  InitLogging("train", worker::LogLevelFlag());
  if (absl::Status st = PinProcess(worker::CpusFlag()); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 2;
  }
  auto options = worker::WorkerOptionsFromFlags();
  if (!options.ok()) {
    spdlog::error("{}", options.status().ToString());
    return 2;
  }
  auto keys = CurveKeysFromFlags();
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }
  options->curve = *keys;
  server::CoordinatorOptions co;
  co.bind = "tcp://127.0.0.1:0";
  co.num_servers = 1;
  co.num_workers = 1;
  co.consistency = proto::Consistency::kBsp;  // one worker: the same as any model, exactly
  ZmqTransportOptions t;
  t.name = "coordinator";
  t.curve = *keys;
  auto coordinator = server::Coordinator::Create(co, std::make_unique<ZmqTransport>(t));
  if (!coordinator.ok()) {
    spdlog::error("{}", coordinator.status().ToString());
    return 1;
  }
  server::ServerOptions so;
  so.coordinator = (*coordinator)->endpoint();
  so.bind = "tcp://127.0.0.1:0";
  t.name = "server";
  auto server = server::ParameterServer::Create(so, std::make_unique<ZmqTransport>(t));
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  absl::Status server_status, coordinator_status;
  std::thread server_thread([&] { server_status = (*server)->Run(); });
  std::thread coordinator_thread([&] { coordinator_status = (*coordinator)->Run(); });
  options->coordinator = (*coordinator)->endpoint();
  options->bind = "tcp://127.0.0.1:0";
  absl::Status st = worker::RunWorker(*options);
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    (*coordinator)->RequestStop();
    (*server)->RequestStop();
  }
  server_thread.join();
  coordinator_thread.join();
  return st.ok() && server_status.ok() && coordinator_status.ok() ? 0 : 1;
}

}  // namespace pstrain::launcher
