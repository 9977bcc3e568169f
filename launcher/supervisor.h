// Supervisor: starts child processes, relays their output line by line with
// a "[role rank]" prefix, and stops them all together.
//
// Children run in their own process group (a terminal's Ctrl-C reaches only
// the launcher, which then stops them in order) and die with the launcher
// (PR_SET_PDEATHSIG). Not thread-safe: one thread drives it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain::launcher {

struct ChildSpec {
  std::string label;   // e.g. "server 1"
  std::string binary;  // path
  std::vector<std::string> args;
};

struct ChildState {
  std::string label;
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;     // valid when !running: exit status, or 128 + signal
};

class Supervisor {
 public:
  Supervisor();
  ~Supervisor();

  // Starts a child; returns its index.
  absl::StatusOr<int> Start(const ChildSpec& spec);

  // Relays output and reaps exits for up to `timeout` (returns early when a
  // child exits or `wake_fd` becomes readable). Returns the indices of
  // children that exited during this call.
  std::vector<int> Pump(absl::Duration timeout, int wake_fd = -1);

  // SIGTERM to every running child, then SIGKILL to those still running
  // after `grace`. Output keeps being relayed meanwhile.
  void StopAll(absl::Duration grace);

  const ChildState& child(int i) const { return children_[i].state; }
  int size() const { return static_cast<int>(children_.size()); }
  bool AnyRunning() const;

  // Writes a line from the launcher itself, prefixed "[pstrain]".
  static void Say(const std::string& line);

 private:
  struct Child {
    ChildState state;
    int fd = -1;         // read end of the child's stdout+stderr
    std::string partial;  // output not yet ended by a newline
  };
  void Drain(Child& c, bool final);
  std::vector<int> Reap();

  std::vector<Child> children_;
};

}  // namespace pstrain::launcher
