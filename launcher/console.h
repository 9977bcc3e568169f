// Console: what a person sees of `pstrain local` on its standard output.
//
// Every child's line is relayed with its role ("[worker 0] ..."). At the
// default verbosity (--v=0) an info line loses its time, level and logger
// name (a warning or error keeps its level), the lines of the cluster's own
// life (who joined where, tables created, shut down, per-table statistics,
// each worker's standardization and end-of-training lines) are left out,
// and once the launcher stops the cluster (Ctrl-C, a failed process) the
// children's "CANCELLED" errors are too; the lead
// worker's progress lines are redrawn in place when standard output is a
// terminal. --v=1 relays every line as the process wrote it.
//
// One per process (standard output is one); used by the launcher's one
// thread.
#pragma once

#include <string>
#include <string_view>

namespace pstrain::launcher {

class Console {
 public:
  static Console& Get();

  // `verbosity` 0: the person's view; 1 and up: every line as written.
  // `terminal`: stdout is a terminal (progress redrawn in place).
  void Configure(int verbosity, bool terminal);
  int verbosity() const { return verbosity_; }

  // One line (without its newline) of child `label`.
  void ChildLine(const std::string& label, std::string_view line);
  // A line of the launcher's own, prefixed "[pstrain]".
  void Say(const std::string& line);
  // The launcher stops the cluster (Ctrl-C, a failed process, a timeout):
  // the children's cancellations that follow are not news.
  void Stopping() { stopping_ = true; }
  // Ends a progress line drawn in place (before the launcher exits).
  void EndProgress();

  // The line as shown at --v=0 ("" : not shown); exposed for tests.
  // `*progress`: it is a progress line (drawn in place on a terminal).
  std::string Shown(const std::string& label, std::string_view line, bool* progress) const;

 private:
  void Write(const std::string& text);

  int verbosity_ = 0;
  bool terminal_ = false;
  bool stopping_ = false;
  std::string progress_;  // the progress line drawn in place ("" : none)
};

}  // namespace pstrain::launcher
