// Arguments of the launcher's subcommands: "--name=value", "--name value"
// and bare "--flag" (= true). `pstrain` is one binary of many commands, each
// with flags of its own (FlagSet) beside the job's: this splits the command
// line, each command takes its own flags, and the job's fields go into a
// JobSpec (launcher/job_args.h), whose values the worker's and the
// coordinator's Abseil flags parse and check (launcher/job_check.h). Kept by
// hand because Debian 12's Abseil (20220623) cannot parse one command's
// flags and hand back another's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launcher {

struct Arg {
  std::string name;   // without dashes
  std::string value;  // "true" for a bare flag
  bool has_value = false;
  std::string text;   // the argument to pass on: "--name=value", or "--name" when bare
};

// Splits argv into flags (positional arguments are an error). A flagfile
// given as --flagfile=F is expanded in place (one flag per line, '#'
// comments).
absl::StatusOr<std::vector<Arg>> ParseArgs(const std::vector<std::string>& argv);

// True when `argv` asks for help: --help or -h anywhere in it.
bool WantsHelp(const std::vector<std::string>& argv);

// " (did you mean --NAME?)" for the candidate closest to `name` when it is
// close enough to be a typo of it (e.g. batchsize -> batch_size); "" if none.
std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates);

// A subcommand's own flags: each known name with its default and help.
class FlagSet {
 public:
  FlagSet& Define(const std::string& name, const std::string& default_value,
                  const std::string& help);
  // Takes the arguments this set knows; with `keep_unknown`, the rest are
  // returned, otherwise they are an error naming the flag.
  absl::StatusOr<std::vector<Arg>> Take(const std::vector<Arg>& args, bool keep_unknown);
  // ParseArgs + Take: the prologue of every subcommand. Errors are usage
  // errors (launcher/command.h, exit code 2).
  absl::StatusOr<std::vector<Arg>> Parse(const std::vector<std::string>& argv,
                                         bool keep_unknown);
  // The defined names, in definition order.
  const std::vector<std::string>& names() const { return order_; }

  std::string Get(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name) const;
  absl::StatusOr<double> GetDouble(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  bool IsSet(const std::string& name) const { return set_.count(name) > 0; }
  std::string Help() const;

 private:
  struct Flag {
    std::string default_value;
    std::string help;
  };
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> set_;
};

}  // namespace pstrain::launcher
