// pstrain_server: one parameter server (a shard of every table).
#include <atomic>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "cluster/coordinator_client.h"
#include "common/byte_size.h"
#include "common/cpu_affinity.h"
#include "common/process.h"
#include "job/flags/job_flag.h"
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
ABSL_FLAG(std::string, server_memory_budget, "",
          "Memory for this server's tables, e.g. 1GB or 512MiB (K, M, G, T: powers of 1024). "
          "Sparse rows past it live in a disk tier in --tier_dir (--tier_store): the rows used most stay in RAM, "
          "the others are read (and, used once, updated) on disk when a request needs them. The "
          "budget also covers the dense tables, the tier's own 48 MiB per server thread and 64 "
          "MiB for the process. Empty: every row in RAM.");
ABSL_FLAG(std::string, tier_dir, "",
          "Folder of the disk tier (with --server_memory_budget): one folder per server thread, "
          "server<RANK>-part<P>. Scratch: a server erases what an earlier one left there "
          "(its rows come back from the job's checkpoint), but refuses to start on a folder "
          "that cannot be opened.");
ABSL_FLAG(std::string, tier_store, "slots",
          "How the disk tier stores rows: slots (fixed-size slots in memory-mapped files, an "
          "in-RAM index from id to slot: a miss is a copy from the page cache) or rocksdb (a "
          "RocksDB per server thread: a miss is a point lookup, several times slower).");
ABSL_FLAG(std::string, cpus, "", pstrain::kCpusFlagHelp);
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");

namespace {
// Tearing down (closing sockets, joining threads) takes milliseconds; past
// this a vanished peer holds it up and the process ends anyway.
constexpr absl::Duration kTeardownGrace = absl::Seconds(10);

std::atomic<pstrain::server::ParameterServer*> g_server{nullptr};

// --server_memory_budget and --tier_dir: usage errors (exit 2) first, then
// the folder itself (exit 1).
absl::StatusOr<pstrain::server::TierConfig> TierFromFlags(int* exit_code) {
  pstrain::server::TierConfig tier;
  const std::string budget = absl::GetFlag(FLAGS_server_memory_budget);
  tier.dir = absl::GetFlag(FLAGS_tier_dir);
  *exit_code = 2;
  if (budget.empty()) {
    if (!tier.dir.empty()) {
      return absl::InvalidArgumentError("--tier_dir needs --server_memory_budget");
    }
    return tier;
  }
  auto bytes = pstrain::ParseByteSize(budget);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server_memory_budget: ", bytes.status().message()));
  }
  if (*bytes == 0) return absl::InvalidArgumentError("--server_memory_budget must be above 0");
  if (tier.dir.empty()) {
    return absl::InvalidArgumentError(
        "--server_memory_budget needs --tier_dir: the folder for the rows past the budget");
  }
  tier.memory_budget = *bytes;
  const std::string store = absl::GetFlag(FLAGS_tier_store);
  if (store == "slots") {
    tier.store = pstrain::server::TierStore::kSlots;
  } else if (store == "rocksdb") {
    tier.store = pstrain::server::TierStore::kRocksDb;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--tier_store=", store, ": want slots or rocksdb"));
  }
  *exit_code = 1;
  PS_RETURN_IF_ERROR(pstrain::server::DiskTier::CheckFolder(tier.dir, absl::GetFlag(FLAGS_rank)));
  return tier;
}

absl::Status RunServer(const pstrain::CurveKeys& keys,
                       const pstrain::server::TierConfig& tier) {
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
  o.tier = tier;
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
  // Bad security settings are bad flags: exit 2, like the other flag errors.
  auto keys = pstrain::CurveKeysFromFlags();
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }
  // The job (--job, or the coordinator's) fills the flags not given here.
  pstrain::job::JobSourceOptions from;
  from.coordinator = absl::GetFlag(FLAGS_coordinator);
  from.curve = *keys;
  from.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
  if (auto job = pstrain::job::TakeJob(argc, argv, pstrain::job::kServer, from); !job.ok()) {
    spdlog::error("{}", job.status().ToString());
    return absl::IsUnavailable(job.status()) ? 1 : 2;
  }
  const int threads = absl::GetFlag(FLAGS_server_threads);
  if (threads < 1 || threads > pstrain::server::ShardSet::kMaxThreads) {
    spdlog::error("--server_threads={}: must be in [1, {}]", threads,
                  pstrain::server::ShardSet::kMaxThreads);
    return 2;
  }
  int tier_exit = 0;
  auto tier = TierFromFlags(&tier_exit);
  if (!tier.ok()) {
    spdlog::error("{}", tier.status().ToString());
    return tier_exit;
  }
  absl::Status st = RunServer(*keys, *tier);
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
