// Command: one subcommand of `pstrain` (local, gen, train, ...), and the
// dispatcher that runs the one named on the command line.
//
// A command returns an absl::Status; the dispatcher alone turns it into the
// exit code (0 OK, 2 usage error, 1 any other failure, or the code attached
// with WithExitCode) and prints "pstrain <command>: <message>" once.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain::launcher {

struct Command {
  const char* name;     // "local"
  const char* summary;  // one line in `pstrain --help`
  // The text of `pstrain NAME --help`: usage, what it does, its flags.
  std::string (*help)();
  // Runs with the arguments after the command's name.
  absl::Status (*run)(const std::vector<std::string>& args);
};

// The error for a bad invocation (bad flag, value, missing input): exit 2.
absl::Status UsageError(absl::string_view message);
// `status` (not OK) carrying the process exit code `code`.
absl::Status WithExitCode(absl::Status status, int code);
// 0 for OK; the code attached by UsageError/WithExitCode; 1 otherwise.
int ExitCodeOf(const absl::Status& status);

// The folder of the running binary (/proc/self/exe), where the launcher
// finds pstrain_coordinator, pstrain_server and pstrain_worker.
std::string BinaryDir();

// Runs the command named by argv[0] (argv: the arguments after "pstrain").
// No command or --help: the list of commands. `NAME --help`: its help, 0.
int Dispatch(const std::vector<Command>& commands, const std::vector<std::string>& argv);

}  // namespace pstrain::launcher
