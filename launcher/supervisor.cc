#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/console.h"

namespace pstrain::launcher {
namespace {

// SIGTERM to SIGKILL when a Supervisor goes with children still running
// (its owner stops them first, with its own grace, on every normal path).
constexpr absl::Duration kDestructorGrace = absl::Seconds(3);
// While stopping, output is relayed and exits reaped at least this often.
constexpr absl::Duration kStopPoll = absl::Milliseconds(50);

}  // namespace

Supervisor::Supervisor() = default;

Supervisor::~Supervisor() {
  if (AnyRunning()) StopAll(kDestructorGrace);
  for (Child& c : children_) {
    if (c.fd >= 0) close(c.fd);
  }
}

void Supervisor::Say(const std::string& line) { Console::Get().Say(line); }

absl::StatusOr<int> Supervisor::Start(const ChildSpec& spec) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  std::vector<std::string> argv_s;
  argv_s.push_back(spec.binary);
  argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ErrnoToStatus(errno, "fork");
  }
  if (pid == 0) {
    // Child: its own process group, dies with the launcher, signals
    // unblocked (the launcher blocks them for its signal thread).
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv(spec.binary.c_str(), argv.data());
    std::string msg = absl::StrCat("cannot run ", spec.binary, ": ", std::strerror(errno), "\n");
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  Child c;
  c.state.label = spec.label;
  c.state.pid = pid;
  c.state.running = true;
  c.fd = fds[0];
  children_.push_back(std::move(c));
  return static_cast<int>(children_.size() - 1);
}

void Supervisor::Drain(Child& c, bool final) {
  char buf[65536];
  while (c.fd >= 0) {
    ssize_t n = read(c.fd, buf, sizeof(buf));
    if (n > 0) {
      c.partial.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // the child closed its output
      close(c.fd);
      c.fd = -1;
      final = true;
    }
    break;  // EAGAIN: nothing more for now
  }
  Console& console = Console::Get();
  size_t start = 0;
  while (true) {
    size_t nl = c.partial.find('\n', start);
    if (nl == std::string::npos) break;
    console.ChildLine(c.state.label, std::string_view(c.partial).substr(start, nl - start));
    start = nl + 1;
  }
  c.partial.erase(0, start);
  if (final && !c.partial.empty()) {
    console.ChildLine(c.state.label, c.partial);
    c.partial.clear();
  }
}

std::vector<int> Supervisor::Reap() {
  std::vector<int> exited;
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (!c.state.running) continue;
    int status = 0;
    pid_t r = waitpid(c.state.pid, &status, WNOHANG);
    if (r != c.state.pid) continue;
    c.state.running = false;
    c.state.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    Drain(c, true);
    exited.push_back(static_cast<int>(i));
  }
  return exited;
}

std::vector<int> Supervisor::Pump(absl::Duration timeout, int wake_fd) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  for (Child& c : children_) {
    if (c.fd >= 0) {
      fds.push_back({c.fd, POLLIN, 0});
      owners.push_back(&c);
    }
  }
  if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
  // Exits are noticed by polling waitpid: cap the wait.
  int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout), 100));
  int rc = poll(fds.data(), fds.size(), ms);
  if (rc > 0) {
    for (size_t i = 0; i < owners.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP)) Drain(*owners[i], false);
    }
  }
  return Reap();
}

bool Supervisor::AnyRunning() const {
  for (const Child& c : children_) {
    if (c.state.running) return true;
  }
  return false;
}

void Supervisor::StopAll(absl::Duration grace) {
  for (Child& c : children_) {
    if (c.state.running) kill(c.state.pid, SIGTERM);
  }
  absl::Time give_up = absl::Now() + grace;
  while (AnyRunning() && absl::Now() < give_up) Pump(kStopPoll);
  for (Child& c : children_) {
    if (c.state.running) {
      Say(absl::StrCat(c.state.label, " did not stop in time: killing it"));
      kill(c.state.pid, SIGKILL);
    }
  }
  while (AnyRunning()) Pump(kStopPoll);
}

}  // namespace pstrain::launcher
