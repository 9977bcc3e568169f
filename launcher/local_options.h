// The options of `pstrain local`: its own flags, the flags it routes to the
// coordinator, to every process and to the workers, all checked here
// (with the data files) before any process starts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/args.h"

namespace pstrain::launcher {

struct LocalOptions {
  int servers = 2;
  int workers = 2;
  int server_threads = 1;
  std::string server_memory_budget;  // pstrain_server --server_memory_budget ("": none)
  std::string tier_dir;              // pstrain_server --tier_dir
  std::string tier_store;            // pstrain_server --tier_store
  std::string bin_dir;    // the pstrain_* binaries
  double timeout = 0;     // seconds; 0: no limit
  bool metrics = false;
  bool dashboard = false;
  int dashboard_port = 0;
  bool restart_failed = false;
  int max_restarts = 3;
  bool pin_cpus = false;
  bool elastic_workers = false;  // the coordinator's --elastic_workers
  bool recover_workers = false;  // the coordinator's --recover_workers
  bool journaled = false;        // the coordinator has a --checkpoint_dir (its journal)
  std::string checkpoint_dir;    // the coordinator's --checkpoint_dir
  bool new_job = false;          // the coordinator's --new_job
  bool continue_job = false;     // the coordinator's --continue_job
  int epochs = 1;                // the workers' --epochs
  int verbosity = 0;             // --v (launcher/console.h)
  // Node settings (launcher/job_check.h LocalNodeFlags) as given, by
  // destination.
  std::vector<std::string> coordinator_args;  // coordinator only
  std::vector<std::string> common_args;       // every process
  std::vector<std::string> worker_args;       // workers only
  std::string metrics_out;                    // the workers' --metrics_out
  // The job (launcher/job_args.h), checked, as a job file's text: every
  // process starts from it (--job), and the coordinator hands it to any
  // other node that asks.
  std::string job_text;
};

// The flags `pstrain local` defines itself (for --help).
FlagSet LocalFlags();

// Parses and checks `argv` (flags, flagfiles, --job): the job as every role
// reads it (launcher/job_check.h), the node settings, the keys of --auth=curve, and the data files (they exist, are
// readable and not empty, and their first lines parse with the job's
// schema). Usage errors (exit code 2) name the flag or file.
absl::StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& argv);

}  // namespace pstrain::launcher
