#include "launcher/commands.h"

namespace pstrain::launcher {

const std::vector<Command>& AllCommands() {
  static const auto* commands = new std::vector<Command>{
      {"local", "start a whole cluster (coordinator, servers, workers) on this machine",
       LocalHelp, RunLocal},
      {"job", "show a job (a job file and flags): every field, its value and where it came from",
       JobHelp, RunJob},
      {"gen", "write synthetic Criteo-format click data and print its oracle AUC", GenHelp, RunGen},
      {"train", "train in one process (coordinator, one server, one worker as threads)",
       TrainHelp, RunTrain},
      {"predict", "score a file with a model exported by --save_model", PredictHelp, RunPredict},
      {"serve", "serve predictions over HTTP from a model folder, taking up each new version",
       ServeHelp, RunServe},
      {"model", "show a model file's network, or inspect an exported model and verify its checksums",
       ModelHelp, RunModel},
      {"ckpt", "inspect a checkpoint (tables, rows, bytes, step) and verify its checksums",
       CkptHelp, RunCkpt},
      {"health", "ping a node (exit 0 when it answers OK): for container healthchecks",
       HealthHelp, RunHealth},
      {"plot",
       "draw the training curves of --metrics_out files into a PNG, an SVG or an HTML page",
       PlotHelp, RunPlot},
      {"dashboard", "serve the dashboard of a job that has ended, from its folder (--job_dir)",
       DashboardHelp, RunDashboard},
      {"keygen", "make the CURVE keys of a cluster (for --auth=curve --keys_dir=DIR)", KeygenHelp,
       RunKeygen},
      {"plan",
       "list the layouts (replicas x stages x tensor-parallel) of pipeline mode with their\n"
       "           memory and traffic; --trial_steps runs the best ones; --hosts predicts\n"
       "           scaling; --server_memory sizes the servers for the tables",
       PlanHelp, RunPlan},
  };
  return *commands;
}

}  // namespace pstrain::launcher
