// Helpers for tests that start real pstrain processes on 127.0.0.1: spawn
// with output captured to a file, wait with a deadline, kill, free ports.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pstrain::testing {

// The folder with the pstrain binaries (PSTRAIN_BIN_DIR, set by CTest).
std::string BinDir();
// A fresh temporary folder, removed by the caller (or left for inspection).
std::string MakeTempDir(const std::string& prefix);

// The bytes of the file at `path` ("" when it cannot be read).
std::string ReadFile(const std::string& path);
// A TCP port that was free a moment ago on 127.0.0.1.
int FreePort();

class TestProcess {
 public:
  // Starts `binary` (a name in BinDir() or a path) with `args`; stdout and
  // stderr go to `log_path`. The child is killed if the test process dies.
  TestProcess(const std::string& binary, const std::vector<std::string>& args,
              const std::string& log_path);
  ~TestProcess();  // SIGKILLs a child still running
  TestProcess(const TestProcess&) = delete;
  TestProcess& operator=(const TestProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Waits up to `timeout`; returns the exit code (128 + signal), or -1 when
  // it is still running.
  int Wait(absl::Duration timeout);
  void Signal(int sig);
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
  std::string log_path_;
};

// Runs `pstrain args...` to its end (killed after `timeout`), output to
// `log_path` and into `*out`; returns the exit code, printing the log when
// it is not 0.
int RunPstrain(const std::vector<std::string>& args, const std::string& log_path,
               std::string* out, absl::Duration timeout);

// Waits until `path` exists and is non-empty; returns its first line, or
// "" after `timeout`.
std::string WaitForFileLine(const std::string& path, absl::Duration timeout);

// The value of "key" in the last JSON line of `path` that has it (NaN: none).
double LastJsonNumber(const std::string& path, const std::string& key);

// A synthetic job's data in `dir`: train.tsv with `train_rows` rows and
// eval.tsv with the next `eval_rows` of the same world (seed).
struct TrainEval {
  std::string train, eval;
};
TrainEval WriteTrainEval(const std::string& dir, uint64_t seed, int64_t train_rows,
                         int64_t eval_rows);

// Rows of shard `shard` of `num_shards` of `pattern` (a path or glob), as a
// worker's reader sees them (-1, with a test failure, when it cannot read).
int64_t ShardRows(const std::string& pattern, int shard, int num_shards);

}  // namespace pstrain::testing
