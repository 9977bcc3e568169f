// pstrain: the launcher and tools of pstrain.
#include <string>
#include <vector>

#include "launcher/commands.h"

int main(int argc, char** argv) {
  return pstrain::launcher::Dispatch(pstrain::launcher::AllCommands(),
                                     std::vector<std::string>(argv + 1, argv + argc));
}
