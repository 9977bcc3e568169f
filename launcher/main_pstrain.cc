// pstrain: the launcher and tools of pstrain.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "launcher/commands.h"

namespace {

void Usage() {
  std::printf(
      "usage: pstrain <command> [flags]\n\n"
      "commands:\n"
      "  local   start a whole cluster (coordinator, servers, workers) on this machine\n"
      "  gen     write synthetic Criteo-format click data and print its oracle AUC\n"
      "  train   train in one process (coordinator, one server, one worker as threads)\n"
      "  predict score a file with a model exported by --save_model\n"
      "  ckpt    inspect a checkpoint (tables, rows, bytes, step) and verify its checksums\n"
      "  health  ping a node (exit 0 when it answers OK): for container healthchecks\n"
      "  plot    draw the training curves of --metrics_out files into one HTML page\n"
      "  keygen  make the CURVE keys of a cluster (for --auth=curve --keys_dir=DIR)\n"
      "  plan    list the layouts (replicas x stages x tensor-parallel) of pipeline mode with\n"
      "          their memory and traffic; --trial_steps runs the best ones\n\n"
      "`pstrain <command> --help` explains each command's flags.\n"
      "The cluster binaries are pstrain_coordinator, pstrain_server and pstrain_worker.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    Usage();
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "local") return pstrain::launcher::RunLocal(args);
  if (cmd == "gen") return pstrain::launcher::RunGen(args);
  if (cmd == "train") return pstrain::launcher::RunTrain(args);
  if (cmd == "predict") return pstrain::launcher::RunPredict(args);
  if (cmd == "ckpt") return pstrain::launcher::RunCkpt(args);
  if (cmd == "health") return pstrain::launcher::RunHealth(args);
  if (cmd == "plot") return pstrain::launcher::RunPlot(args);
  if (cmd == "keygen") return pstrain::launcher::RunKeygen(args);
  if (cmd == "plan") return pstrain::launcher::RunPlan(args);
  std::fprintf(stderr, "pstrain: unknown command '%s'\n\n", cmd.c_str());
  Usage();
  return 2;
}
