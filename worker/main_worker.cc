// pstrain_worker: trains a model replica on its shard of the data, pulling
// parameters from and pushing gradients to the parameter servers.
#include <spdlog/spdlog.h>

#include "cluster/coordinator_client.h"
#include "common/cpu_affinity.h"
#include "common/process.h"
#include "common/security/security_flags.h"
#include "job/flags/job_flag.h"
#include "worker/flags/worker_flags.h"
#include "worker/worker_app.h"

int main(int argc, char** argv) {
  pstrain::ParseFlagsWithEnv(
      argc, argv,
      "pstrain_worker --coordinator=tcp://HOST:PORT --train_data=FILES [--eval_data=FILES] "
      "[--model=dlrm] ...\nOne worker of a pstrain job. Flags may also come from PSTRAIN_<FLAG> "
      "environment variables.");
  pstrain::InitLogging("worker", pstrain::worker::LogLevelFlag());
  // Before any thread starts, so that they all inherit it.
  if (absl::Status st = pstrain::PinProcess(pstrain::worker::CpusFlag()); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 2;
  }
  pstrain::HandleTerminationSignals([](int sig) {
    spdlog::warn("signal {}: stopping", sig);
    std::_Exit(128 + sig);
  });
  auto keys = pstrain::CurveKeysFromFlags();
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }
  // The job (--job, or the coordinator's) fills the flags not given here.
  if (auto job = pstrain::job::TakeJob(argc, argv, pstrain::job::kWorker,
                                       pstrain::worker::JobSourceFromFlags(*keys));
      !job.ok()) {
    spdlog::error("{}", job.status().ToString());
    return absl::IsUnavailable(job.status()) ? 1 : 2;
  }
  auto options = pstrain::worker::WorkerOptionsFromFlags();
  if (!options.ok()) {
    spdlog::error("{}", options.status().ToString());
    return 2;
  }
  options->curve = *keys;
  options->exit_watchdog = true;
  absl::Status st = pstrain::worker::RunWorker(*options, pstrain::worker::ProcessRuntime());
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
