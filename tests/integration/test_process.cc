#include "tests/integration/test_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "data/reader.h"
#include "data/synthetic.h"

namespace pstrain::testing {

std::string BinDir() {
  const char* d = std::getenv("PSTRAIN_BIN_DIR");
  return d != nullptr ? d : "build/bin";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  char* d = mkdtemp(tmpl.data());
  return d != nullptr ? std::string(d) : "/tmp";
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

TestProcess::TestProcess(const std::string& binary, const std::vector<std::string>& args,
                         const std::string& log_path)
    : log_path_(log_path) {
  std::string path = binary.find('/') == std::string::npos ? BinDir() + "/" + binary : binary;
  std::vector<std::string> argv_s = {path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    // The tests read the processes' whole logs: `pstrain local` relays every
    // line (--v=1) unless a test asks for the person's view (--v=0).
    setenv("PSTRAIN_V", "1", /*overwrite=*/0);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
}

TestProcess::~TestProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

bool TestProcess::running() {
  if (exited_ || pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

int TestProcess::Wait(absl::Duration timeout) {
  absl::Time until = absl::Now() + timeout;
  while (running()) {
    if (absl::Now() > until) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return code_;
}

void TestProcess::Signal(int sig) {
  if (running()) kill(pid_, sig);
}

std::string TestProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WaitForFileLine(const std::string& path, absl::Duration timeout) {
  absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

double LastJsonNumber(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  double value = NAN;
  std::regex re("\"" + key + "\":([-0-9.eE]+)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, re)) value = std::stod(m[1]);
  }
  return value;
}

TrainEval WriteTrainEval(const std::string& dir, uint64_t seed, int64_t train_rows,
                         int64_t eval_rows) {
  TrainEval d{dir + "/train.tsv", dir + "/eval.tsv"};
  worker::SyntheticOptions o;
  o.seed = seed;
  o.rows = train_rows;
  EXPECT_TRUE(worker::WriteSynthetic(o, d.train).ok());
  o.first_row = train_rows;
  o.rows = eval_rows;
  EXPECT_TRUE(worker::WriteSynthetic(o, d.eval).ok());
  return d;
}

int RunPstrain(const std::vector<std::string>& args, const std::string& log_path,
               std::string* out, absl::Duration timeout) {
  TestProcess p(BinDir() + "/pstrain", args, log_path);
  const int code = p.Wait(timeout);
  *out = p.Log();
  if (code != 0) std::printf("--- %s: exit %d\n%s", log_path.c_str(), code, out->c_str());
  return code;
}

int64_t ShardRows(const std::string& pattern, int shard, int num_shards) {
  worker::ReaderOptions ro;
  ro.patterns = {pattern};
  ro.shard_index = shard;
  ro.num_shards = num_shards;
  auto reader = worker::DataReader::Open(ro);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return -1;
  int64_t rows = 0;
  while (true) {
    auto b = (*reader)->Next();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok() || !*b) break;
    rows += (*b)->size;
  }
  return rows;
}

}  // namespace pstrain::testing
