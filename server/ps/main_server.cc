// pstrain_server: one parameter server (a shard of every table).
#include <atomic>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "cluster/coordinator_client.h"
#include "common/cpu_affinity.h"
#include "common/process.h"
#include "common/security/security_flags.h"
#include "common/zmq_transport.h"
#include "server/ps/parameter_server.h"

ABSL_FLAG(std::string, coordinator, "tcp://127.0.0.1:7000", "Endpoint of the job's coordinator.");
ABSL_FLAG(std::string, bind, "tcp://0.0.0.0:0", "Endpoint to listen on (port 0: any free port).");
ABSL_FLAG(std::string, advertise_host, "", "Host name others use to reach this node (default: hostname).");
ABSL_FLAG(int, rank, -1, "Server rank to take (-1: the coordinator assigns one).");
ABSL_FLAG(double, connect_timeout, 60.0, "Seconds to keep retrying while the coordinator is unreachable.");
ABSL_FLAG(double, coordinator_timeout, 120.0,
          "When the coordinator stops answering (heartbeats unanswered for 10 intervals, at least "
          "2 s), keep this server's tables and register again with its rank for up to this many "
          "seconds, so a restarted coordinator (one with a --checkpoint_dir journal) takes the job "
          "back; then exit 1 naming why. Meanwhile pstrain health reports it unhealthy.");
ABSL_FLAG(int, metrics_port, 0, "Serve Prometheus metrics at http://HOST:PORT/metrics (0: off).");
ABSL_FLAG(std::string, http_host, "0.0.0.0", "Address the --metrics_port server listens on.");
ABSL_FLAG(int, server_threads, 1,
          "Executor threads that own parts of this server's shard (sparse rows by hash, dense "
          "ranges in pieces); the I/O thread hands each request's parts to their owners. 1: the "
          "I/O thread owns the whole shard (no hand-over; best when cores are scarce).");
ABSL_FLAG(std::string, cpus, "", pstrain::kCpusFlagHelp);
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");

namespace {
// Tearing down (closing sockets, joining threads) takes milliseconds; past
// this a vanished peer holds it up and the process ends anyway.
constexpr absl::Duration kTeardownGrace = absl::Seconds(10);

std::atomic<pstrain::server::ParameterServer*> g_server{nullptr};

absl::Status RunServer(const pstrain::CurveKeys& keys) {
  using namespace pstrain;
  server::ServerOptions o;
  o.coordinator = absl::GetFlag(FLAGS_coordinator);
  o.bind = absl::GetFlag(FLAGS_bind);
  o.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  o.rank = absl::GetFlag(FLAGS_rank);
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
  o.coordinator_timeout = absl::Seconds(absl::GetFlag(FLAGS_coordinator_timeout));
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.http_host = absl::GetFlag(FLAGS_http_host);
  o.threads = absl::GetFlag(FLAGS_server_threads);
  ZmqTransportOptions t;
  t.name = "server";
  t.curve = keys;
  PS_ASSIGN_OR_RETURN(auto server,
                      server::ParameterServer::Create(o, std::make_unique<ZmqTransport>(t)));
  g_server = server.get();
  absl::Status st = server->Run();
  g_server = nullptr;
  ExitWithin(kTeardownGrace, st.ok() ? 0 : 1);
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::ParseFlagsWithEnv(argc, argv,
                             "pstrain_server --coordinator=tcp://HOST:PORT\n"
                             "One parameter server of a pstrain job. Flags may also come from "
                             "PSTRAIN_<FLAG> environment variables.");
  pstrain::InitLogging("server", absl::GetFlag(FLAGS_log_level));
  // Before any thread starts, so that they all inherit it.
  if (absl::Status st = pstrain::PinProcess(absl::GetFlag(FLAGS_cpus)); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 2;
  }
  pstrain::HandleTerminationSignals([](int) {
    if (auto* s = g_server.load()) s->RequestStop();
  });
  const int threads = absl::GetFlag(FLAGS_server_threads);
  if (threads < 1 || threads > pstrain::server::ShardSet::kMaxThreads) {
    spdlog::error("--server_threads={}: must be in [1, {}]", threads,
                  pstrain::server::ShardSet::kMaxThreads);
    return 2;
  }
  // Bad security settings are bad flags: exit 2, like the other flag errors.
  auto keys = pstrain::CurveKeysFromFlags();
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }
  absl::Status st = RunServer(*keys);
  if (pstrain::IsNothingLeftToDo(st)) {
    // The job finished, or goes on without this node: a clean end.
    spdlog::info("{}", std::string(st.message()));
    return 0;
  }
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  return 0;
}
