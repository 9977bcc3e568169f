// pstrain: the launcher and tools of pstrain.
#include <string>
#include <vector>

#include "common/process.h"
#include "launcher/commands.h"

int main(int argc, char** argv) {
  // Its tools connect too (pstrain health, predict against a cluster).
  pstrain::ConfigureResolverFromEnv();
  return pstrain::launcher::Dispatch(pstrain::launcher::AllCommands(),
                                     std::vector<std::string>(argv + 1, argv + argc));
}
