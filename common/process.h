// Process plumbing shared by every binary's main(): flags from PSTRAIN_*
// environment variables, logging set-up and termination signals.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pstrain {

// Parses flags like absl::ParseCommandLine, after first turning every
// PSTRAIN_<NAME>=value environment variable whose lower-cased NAME is a
// defined flag into --<name>=value (command-line flags win, as they come
// later). Unknown PSTRAIN_* variables are ignored (the container entrypoint
// uses some). Returns the positional arguments. Also runs
// ConfigureResolverFromEnv().
// --help (-h, --helpshort) prints FlagsHelp(usage) and exits 0.
std::vector<std::string> ParseFlagsWithEnv(int argc, char** argv, absl::string_view usage);

// A test hook: with PSTRAIN_TEST_HOSTS_FILE=/path set, the process's
// default Resolver answers the names listed in that file before asking the
// system (lines "NAME ADDRESS", "NAME hang" or "NAME fail"; see
// HostsFileLookup in common/resolver.h), so that tests can script what a
// real binary's name lookups return. ParseFlagsWithEnv calls it; a main
// that does not, calls it before its first connection.
void ConfigureResolverFromEnv();

// "--name=value" for every PSTRAIN_<NAME> variable naming a defined flag,
// sorted (what ParseFlagsWithEnv puts before the command line).
std::vector<std::string> FlagArgsFromEnv();

// False for Abseil's own flags (--helpfull, --flagfile, ...).
bool IsProjectFlag(const absl::CommandLineFlag& flag);

// "usage: <usage>" and every project flag, by name, with its default and
// help; no file names (which would be paths of the build machine).
std::string FlagsHelp(absl::string_view usage);

// How --help groups the flags: `section_of` names a flag's section ("" for
// none), `order` lists the sections; flags of no section follow under
// `rest`. Without it, one alphabetical list. Set once, before main (the job
// library sets the job file's sections: job/flags/job_flag.cc).
struct FlagSections {
  std::vector<std::string> order;
  std::function<std::string(absl::string_view flag)> section_of;
  std::string rest;
};
void SetFlagSections(FlagSections sections);

// Sets up spdlog: "[time] [level] <name>: message" on stderr, at `level`
// (trace, debug, info, warn, error).
void InitLogging(const std::string& name, const std::string& level);

// Ignores SIGPIPE in this process (once; idempotent): a write to a socket
// whose peer has gone then fails with EPIPE, which the writer reports
// naming the peer, instead of ending the process. ZeroMQ and cpp-httplib
// send with MSG_NOSIGNAL; Gloo's TCP transport does not. Called by
// HandleTerminationSignals and by GlooCollective::Create.
void IgnoreBrokenPipes();

// Blocks SIGINT and SIGTERM in this thread and in every thread it creates
// afterwards, and runs `fn(signal)` on a dedicated thread when one arrives.
// Call at the top of main(), before any thread exists. Ignores SIGPIPE too.
void HandleTerminationSignals(std::function<void(int)> fn);

// The job's work is over and the process is tearing down: if it has not
// exited within `grace` (a shutdown stuck on a vanished peer), it is ended
// with `exit_code` and a log line saying so. Everything worth keeping
// (checkpoints, metrics, results) is written before this is called.
void ExitWithin(absl::Duration grace, int exit_code);

}  // namespace pstrain
