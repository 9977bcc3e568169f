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
#include "job/flags/job_flag.h"
#include "job/job_flags.h"
#include "common/security/security_flags.h"
#include "common/zmq_transport.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/flags/coordinator_flags.h"

ABSL_FLAG(std::string, bind, "tcp://0.0.0.0:7000",
          "Endpoint to listen on (port 0 picks a free one; see --endpoint_file).");
ABSL_FLAG(std::string, advertise_host, "", "Host name others use to reach this node (default: hostname).");
ABSL_FLAG(std::string, endpoint_file, "", "Write the bound endpoint to this file once listening.");
ABSL_FLAG(int, metrics_port, 0, "Serve Prometheus metrics at http://HOST:PORT/metrics (0: off).");
ABSL_FLAG(int, dashboard_port, 0,
          "Serve the web dashboard at http://HOST:PORT/ (0: off; may equal --metrics_port).");
ABSL_FLAG(std::string, http_host, "0.0.0.0",
          "Address the --metrics_port and --dashboard_port servers listen on.");
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");

namespace {
// Tearing down (closing sockets, joining threads) takes milliseconds; past
// this a vanished peer holds it up and the process ends anyway.
constexpr absl::Duration kTeardownGrace = absl::Seconds(10);
// On a finished job: how long to wait for the job's nodes to come and be
// told (at most --join_timeout).
constexpr absl::Duration kTellFinishedFor = absl::Minutes(2);

std::atomic<pstrain::server::Coordinator*> g_coordinator{nullptr};

absl::Status RunCoordinator(const pstrain::CurveKeys& keys, std::string job) {
  using namespace pstrain;
  server::CoordinatorOptions o;
  o.bind = absl::GetFlag(FLAGS_bind);
  o.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  PS_RETURN_IF_ERROR(server::CoordinatorOptionsFromFlags(&o));
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.dashboard_port = absl::GetFlag(FLAGS_dashboard_port);
  o.http_host = absl::GetFlag(FLAGS_http_host);
  o.job_spec = std::move(job);
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
               o.num_servers, o.num_workers, server::ConsistencyName(o.consistency));
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
  // The job file fills the flags not given here; the coordinator hands it
  // (with this command line's job fields) to every node that asks.
  auto job = pstrain::job::TakeJob(argc, argv, pstrain::job::kCoordinator, {});
  if (!job.ok()) {
    spdlog::error("{}", job.status().ToString());
    return 2;
  }
  std::string job_text;
  if (!job->empty()) {
    const auto given = pstrain::job::ExplicitFlags(argc, argv);
    const pstrain::job::JobSpec resolved =
        pstrain::job::ResolvedJob(*job, pstrain::job::kCoordinator, given);
    for (const pstrain::job::JobValue& v : resolved.values()) {
      if (v.source == pstrain::job::Source::kFlag || v.source == pstrain::job::Source::kEnvironment) {
        job->Set(*v.field, v.value, v.source, v.where);
      }
    }
    job_text = job->ToJson();
  }
  absl::Status st = RunCoordinator(*keys, std::move(job_text));
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  return 0;
}
