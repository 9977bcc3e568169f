// pstrain_coordinator: membership, table layout, barriers, heartbeats and
// the rendezvous store of one training job.
#include <algorithm>
#include <atomic>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/security/security_flags.h"
#include "common/zmq_transport.h"
#include "server/coordinator/coordinator.h"

ABSL_FLAG(std::string, bind, "tcp://0.0.0.0:7000",
          "Endpoint to listen on (port 0 picks a free one; see --endpoint_file).");
ABSL_FLAG(std::string, advertise_host, "", "Host name others use to reach this node (default: hostname).");
ABSL_FLAG(std::string, endpoint_file, "", "Write the bound endpoint to this file once listening.");
ABSL_FLAG(int, servers, 1, "Number of parameter servers in the job.");
ABSL_FLAG(int, workers, 1, "Number of workers in the job.");
ABSL_FLAG(std::string, consistency, "asp", "asp | bsp | ssp: when pulls may see which pushes.");
ABSL_FLAG(int, staleness, 2, "SSP: how many clocks a worker may run ahead of the slowest.");
ABSL_FLAG(double, heartbeat_interval, 1.0, "Seconds between node heartbeats.");
ABSL_FLAG(double, heartbeat_timeout, 10.0, "Seconds without a heartbeat before a node is declared dead.");
ABSL_FLAG(double, join_timeout, 600.0, "Seconds to wait for every node to join.");
ABSL_FLAG(int64_t, dense_chunk, 65536,
          "Dense tables with more floats than this are split across all servers.");
ABSL_FLAG(int, metrics_port, 0, "Serve Prometheus metrics at http://HOST:PORT/metrics (0: off).");
ABSL_FLAG(int, dashboard_port, 0,
          "Serve the web dashboard at http://HOST:PORT/ (0: off; may equal --metrics_port).");
ABSL_FLAG(std::string, http_host, "0.0.0.0",
          "Address the --metrics_port and --dashboard_port servers listen on.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder for checkpoints (shared by the servers and the coordinator); empty: none.");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0, "Checkpoint every N steps (0: not by steps).");
ABSL_FLAG(double, checkpoint_every_secs, 0, "Checkpoint about every N seconds (0: not by time).");
ABSL_FLAG(int, keep_checkpoints, 3, "Complete checkpoints kept; older ones are deleted.");
ABSL_FLAG(std::string, restore, "auto",
          "auto (the latest checkpoint in --checkpoint_dir if any) | latest (must exist) | none | "
          "PATH of a checkpoint folder.");
ABSL_FLAG(bool, recover_servers, true,
          "With --checkpoint_dir: when a server fails, wait for a replacement of its rank (or the "
          "same process heard from again), roll every server back to the latest checkpoint and "
          "resume the workers from it, instead of ending the job.");
ABSL_FLAG(bool, elastic_workers, false,
          "When a worker stops responding, drop it and go on: the servers stop waiting for it and "
          "the first worker to finish its own data trains the rest of its shard; if it was the lead "
          "(worker 0 at first: evaluation, summary, --save_model), the lowest-ranked live worker "
          "takes that over (parameter-server mode). Off: a dead worker ends the job.");
ABSL_FLAG(bool, recover_workers, false,
          "With --checkpoint_dir: when a worker fails, roll the cluster back to the latest "
          "checkpoint as for a failed server, waiting for a replacement of its rank (restart it: "
          "pstrain local --restart_failed, or the orchestrator), which resumes from the "
          "checkpoint's position: every row is trained exactly once. Not with --elastic_workers; "
          "ps and allreduce modes.");
ABSL_FLAG(double, worker_timeout, 0,
          "Seconds without a heartbeat before a worker is declared dead (and, with "
          "--elastic_workers, dropped); 0: --heartbeat_timeout.");
ABSL_FLAG(double, recovery_timeout, 300.0,
          "Seconds to wait for a failed server to come back before ending the job.");
ABSL_FLAG(double, resume_timeout, 120.0,
          "With --checkpoint_dir the coordinator journals the job there "
          "(CKPT_DIR/coordinator.journal). A coordinator started on the journal of a running job "
          "(one that crashed and was restarted) takes it back: it waits this many seconds for the "
          "known servers and workers to register again, keeping their state, and the job goes on "
          "without a rollback. On the journal of a finished job it says so and exits 0 without "
          "training anything (see --new_job).");
ABSL_FLAG(bool, new_job, false,
          "Start a new job from scratch in --checkpoint_dir: the journal and checkpoints an "
          "earlier job left there are moved into CKPT_DIR/previous-<time>, and nothing is "
          "restored unless --restore names a checkpoint.");
ABSL_FLAG(bool, continue_job, false,
          "On the journal of a finished job: train on from its latest checkpoint (workers whose "
          "--epochs grew train the new epochs) instead of saying that it finished.");
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");

namespace {
// Tearing down (closing sockets, joining threads) takes milliseconds; past
// this a vanished peer holds it up and the process ends anyway.
constexpr absl::Duration kTeardownGrace = absl::Seconds(10);
// On a finished job: how long to wait for the job's nodes to come and be
// told (at most --join_timeout).
constexpr absl::Duration kTellFinishedFor = absl::Minutes(2);

std::atomic<pstrain::server::Coordinator*> g_coordinator{nullptr};

absl::Status RunCoordinator(const pstrain::CurveKeys& keys) {
  using namespace pstrain;
  server::CoordinatorOptions o;
  o.bind = absl::GetFlag(FLAGS_bind);
  o.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  o.num_servers = absl::GetFlag(FLAGS_servers);
  o.num_workers = absl::GetFlag(FLAGS_workers);
  PS_ASSIGN_OR_RETURN(o.consistency, server::ParseConsistency(absl::GetFlag(FLAGS_consistency)));
  o.staleness = absl::GetFlag(FLAGS_staleness);
  o.heartbeat_interval = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_interval));
  o.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout));
  o.join_timeout = absl::Seconds(absl::GetFlag(FLAGS_join_timeout));
  o.dense_chunk_floats = static_cast<uint64_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_dense_chunk)));
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.dashboard_port = absl::GetFlag(FLAGS_dashboard_port);
  o.http_host = absl::GetFlag(FLAGS_http_host);
  o.checkpoint.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint.every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  o.checkpoint.every_secs = absl::GetFlag(FLAGS_checkpoint_every_secs);
  o.checkpoint.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  o.checkpoint.restore = absl::GetFlag(FLAGS_restore);
  o.recover_servers = absl::GetFlag(FLAGS_recover_servers);
  o.elastic_workers = absl::GetFlag(FLAGS_elastic_workers);
  o.recover_workers = absl::GetFlag(FLAGS_recover_workers);
  o.worker_timeout = absl::Seconds(absl::GetFlag(FLAGS_worker_timeout));
  o.recovery_timeout = absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout));
  o.resume_timeout = absl::Seconds(absl::GetFlag(FLAGS_resume_timeout));
  o.new_job = absl::GetFlag(FLAGS_new_job);
  o.continue_job = absl::GetFlag(FLAGS_continue_job);
  PS_RETURN_IF_ERROR(server::CheckCoordinatorOptions(o));
  if (!o.checkpoint.dir.empty()) PS_RETURN_IF_ERROR(MakeDirs(o.checkpoint.dir));
  if (o.new_job) {
    if (o.checkpoint.restore == "auto") o.checkpoint.restore = "none";  // from scratch
    if (!o.checkpoint.dir.empty()) {
      PS_ASSIGN_OR_RETURN(std::string archived, server::ArchivePreviousJob(o.checkpoint.dir));
      if (!archived.empty()) {
        spdlog::info("--new_job: the earlier job's journal and checkpoints were moved to {}", archived);
      }
    }
  }
  PS_ASSIGN_OR_RETURN(std::optional<server::JobJournal> finished, server::FinishedJob(o));
  ZmqTransportOptions t;
  t.name = "coordinator";
  t.curve = keys;
  auto write_endpoint = [](const std::string& endpoint) -> absl::Status {
    if (std::string f = absl::GetFlag(FLAGS_endpoint_file); !f.empty()) {
      return WriteFileAtomically(f, endpoint + "\n");
    }
    return absl::OkStatus();
  };
  if (finished) {
    spdlog::info("the job journaled in {} finished{} ({}): nothing left to train; telling its "
                 "nodes, then exiting. Start with --continue_job to train on from its latest "
                 "checkpoint, --new_job to train a new job from scratch, or use another "
                 "--checkpoint_dir.",
                 o.checkpoint.dir,
                 finished->final_step > 0 ? absl::StrCat(" at step ", finished->final_step) : "",
                 finished->ended);
    return server::ServeFinishedJob(o, *finished, std::make_unique<ZmqTransport>(t),
                                    std::min(o.join_timeout, kTellFinishedFor), write_endpoint);
  }
  PS_ASSIGN_OR_RETURN(auto coordinator,
                      server::Coordinator::Create(o, std::make_unique<ZmqTransport>(t)));
  spdlog::info("listening at {} for {} servers and {} workers ({})", coordinator->endpoint(),
               o.num_servers, o.num_workers, absl::GetFlag(FLAGS_consistency));
  PS_RETURN_IF_ERROR(write_endpoint(coordinator->endpoint()));
  g_coordinator = coordinator.get();
  absl::Status st = coordinator->Run();
  g_coordinator = nullptr;
  ExitWithin(kTeardownGrace, st.ok() ? 0 : 1);
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::ParseFlagsWithEnv(argc, argv,
                             "pstrain_coordinator --servers=S --workers=W [--bind=tcp://0.0.0.0:7000]\n"
                             "Coordinates one pstrain training job. Flags may also come from "
                             "PSTRAIN_<FLAG> environment variables.");
  pstrain::InitLogging("coordinator", absl::GetFlag(FLAGS_log_level));
  pstrain::HandleTerminationSignals([](int) {
    if (auto* c = g_coordinator.load()) c->RequestStop();
  });
  // Bad security settings are bad flags: exit 2, like the other flag errors.
  auto keys = pstrain::CurveKeysFromFlags();
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }
  absl::Status st = RunCoordinator(*keys);
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  return 0;
}
