// The launcher's subcommands. Each takes the arguments after its name and
// returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace pstrain::launcher {

int RunLocal(const std::vector<std::string>& args);
int RunGen(const std::vector<std::string>& args);
int RunTrain(const std::vector<std::string>& args);
int RunPredict(const std::vector<std::string>& args);
int RunCkpt(const std::vector<std::string>& args);
int RunHealth(const std::vector<std::string>& args);
int RunPlot(const std::vector<std::string>& args);
int RunKeygen(const std::vector<std::string>& args);
int RunPlan(const std::vector<std::string>& args);

}  // namespace pstrain::launcher
