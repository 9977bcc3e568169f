// The launcher's subcommands: each a help text and a Run returning a
// Status (launcher/command.h turns it into the exit code).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/command.h"

namespace pstrain::launcher {

std::string LocalHelp();
absl::Status RunLocal(const std::vector<std::string>& args);
std::string GenHelp();
absl::Status RunGen(const std::vector<std::string>& args);
std::string TrainHelp();
absl::Status RunTrain(const std::vector<std::string>& args);
std::string PredictHelp();
absl::Status RunPredict(const std::vector<std::string>& args);
std::string ModelHelp();
absl::Status RunModel(const std::vector<std::string>& args);
std::string CkptHelp();
absl::Status RunCkpt(const std::vector<std::string>& args);
std::string HealthHelp();
absl::Status RunHealth(const std::vector<std::string>& args);
std::string PlotHelp();
absl::Status RunPlot(const std::vector<std::string>& args);
std::string DashboardHelp();
absl::Status RunDashboard(const std::vector<std::string>& args);
std::string KeygenHelp();
absl::Status RunKeygen(const std::vector<std::string>& args);
std::string ServeHelp();
absl::Status RunServe(const std::vector<std::string>& args);
std::string JobHelp();
absl::Status RunJob(const std::vector<std::string>& args);
std::string PlanHelp();
absl::Status RunPlan(const std::vector<std::string>& args);

// Every subcommand, in the order `pstrain --help` lists them.
const std::vector<Command>& AllCommands();

}  // namespace pstrain::launcher
