#include "server/coordinator/flags/coordinator_flags.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "common/status.h"

ABSL_FLAG(int, servers, 1, "Number of parameter servers in the job.");
ABSL_FLAG(int, workers, 1, "Number of workers in the job.");
ABSL_FLAG(std::string, consistency, "asp", "asp | bsp | ssp: when pulls may see which pushes.");
ABSL_FLAG(int, staleness, 2, "SSP: how many clocks a worker may run ahead of the slowest.");
ABSL_FLAG(double, heartbeat_interval, 1.0, "Seconds between node heartbeats.");
ABSL_FLAG(double, heartbeat_timeout, 10.0, "Seconds without a heartbeat before a node is declared dead.");
ABSL_FLAG(double, join_timeout, 600.0, "Seconds to wait for every node to join.");
ABSL_FLAG(int64_t, dense_chunk, 65536,
          "Dense tables with more floats than this are split across all servers.");
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

namespace pstrain::server {

absl::Status CoordinatorOptionsFromFlags(CoordinatorOptions* o) {
  o->num_servers = absl::GetFlag(FLAGS_servers);
  o->num_workers = absl::GetFlag(FLAGS_workers);
  PS_ASSIGN_OR_RETURN(o->consistency, ParseConsistency(absl::GetFlag(FLAGS_consistency)));
  o->staleness = absl::GetFlag(FLAGS_staleness);
  o->heartbeat_interval = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_interval));
  o->heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout));
  o->join_timeout = absl::Seconds(absl::GetFlag(FLAGS_join_timeout));
  o->dense_chunk_floats = static_cast<uint64_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_dense_chunk)));
  o->checkpoint.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o->checkpoint.every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  o->checkpoint.every_secs = absl::GetFlag(FLAGS_checkpoint_every_secs);
  o->checkpoint.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  o->checkpoint.restore = absl::GetFlag(FLAGS_restore);
  o->recover_servers = absl::GetFlag(FLAGS_recover_servers);
  o->elastic_workers = absl::GetFlag(FLAGS_elastic_workers);
  o->recover_workers = absl::GetFlag(FLAGS_recover_workers);
  o->worker_timeout = absl::Seconds(absl::GetFlag(FLAGS_worker_timeout));
  o->recovery_timeout = absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout));
  o->resume_timeout = absl::Seconds(absl::GetFlag(FLAGS_resume_timeout));
  o->new_job = absl::GetFlag(FLAGS_new_job);
  o->continue_job = absl::GetFlag(FLAGS_continue_job);
  return CheckCoordinatorOptions(*o);
}

const std::vector<std::string>& CoordinatorFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "servers",
      "workers",
      "consistency",
      "staleness",
      "heartbeat_interval",
      "heartbeat_timeout",
      "join_timeout",
      "dense_chunk",
      "checkpoint_dir",
      "checkpoint_every_steps",
      "checkpoint_every_secs",
      "keep_checkpoints",
      "restore",
      "recover_servers",
      "elastic_workers",
      "recover_workers",
      "worker_timeout",
      "recovery_timeout",
      "resume_timeout",
      "new_job",
      "continue_job",
  };
  return *names;
}

}  // namespace pstrain::server
