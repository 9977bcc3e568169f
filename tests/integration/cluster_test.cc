// Real processes on 127.0.0.1: a whole job through the launcher, start-up in
// any order, failure detection, and a failing worker stopping the cluster.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/file_util.h"
#include "data/synthetic.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

// Train and eval files from one synthetic world.
struct DataFiles {
  std::string dir, train, eval, eval_meta;
};

DataFiles MakeData(int64_t train_rows, int64_t eval_rows) {
  DataFiles d;
  d.dir = MakeTempDir("pstrain-it");
  d.train = d.dir + "/train.tsv";
  d.eval = d.dir + "/eval.tsv";
  worker::SyntheticOptions o;
  o.seed = 3;
  o.rows = train_rows;
  EXPECT_TRUE(worker::WriteSynthetic(o, d.train).ok());
  o.first_row = train_rows;
  o.rows = eval_rows;
  EXPECT_TRUE(worker::WriteSynthetic(o, d.eval).ok());
  return d;
}

// The servers split their shards among two executor threads here (every
// other integration test runs the default, one owner thread), on CPUs of
// their own (--pin_cpus).
TEST(Cluster, TwoServersTwoWorkersTrainLogisticRegressionAboveAuc070) {
  DataFiles d = MakeData(300000, 30000);
  std::string metrics = d.dir + "/metrics.jsonl";
  TestProcess launcher("pstrain",
                       {"local", "--servers=2", "--workers=2", "--model=lr", "--server_threads=2", "--pin_cpus",
                        "--train_data=" + d.train, "--eval_data=" + d.eval,
                        "--metrics_out=" + metrics, "--timeout=240"},
                       d.dir + "/launcher.log");
  int code = launcher.Wait(absl::Minutes(5));
  ASSERT_EQ(code, 0) << launcher.Log();
  std::string log = launcher.Log();
  // Every role took part and stopped in order.
  for (const char* who : {"[server 0]", "[server 1]", "[worker 0]", "[worker 1]", "[coordinator]"}) {
    EXPECT_NE(log.find(who), std::string::npos) << who;
  }
  EXPECT_NE(log.find("all processes finished"), std::string::npos);
  EXPECT_NE(log.find("tables created on 2 executor threads"), std::string::npos) << log;
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() >= 2) {
    const size_t half = cpus.size() / 2;
    EXPECT_NE(log.find(absl::StrCat("servers on CPUs ", FormatCpuList({cpus.begin(), cpus.begin() + half}),
                                    ", workers on ", FormatCpuList({cpus.begin() + half, cpus.end()}))),
              std::string::npos)
        << log;
  }
  double auc = LastJsonNumber(metrics, "eval_auc");
  EXPECT_GT(auc, 0.70) << log;
  EXPECT_GT(LastJsonNumber(metrics, "samples_per_sec"), 0);
  std::filesystem::remove_all(d.dir);
}

// The CPUs every thread of process `pid` may run on, as the kernel lists
// them ("0-1"), one entry per thread.
std::vector<std::string> ThreadCpuLists(pid_t pid) {
  std::vector<std::string> lists;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "status");
    for (std::string line; std::getline(in, line);) {
      if (absl::StartsWith(line, "Cpus_allowed_list:")) {
        lists.emplace_back(absl::StripAsciiWhitespace(line.substr(18)));
      }
    }
  }
  return lists;
}

// Also: --cpus pins every thread of the server and of the worker.
TEST(Cluster, NodesStartedBeforeTheCoordinatorWaitAndJoin) {
  DataFiles d = MakeData(20000, 2000);
  std::string coord = absl::StrCat("tcp://127.0.0.1:", FreePort());
  std::vector<std::string> common = {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0"};
  const std::vector<int> cpus = AllowedCpus();
  const std::string server_cpu = absl::StrCat(cpus.front()), worker_cpu = absl::StrCat(cpus.back());
  std::vector<std::string> sargs = common;
  sargs.push_back("--cpus=" + server_cpu);
  TestProcess server("pstrain_server", sargs, d.dir + "/server.log");
  std::vector<std::string> wargs = common;
  wargs.insert(wargs.end(), {"--model=lr", "--train_data=" + d.train, "--eval_data=" + d.eval,
                             "--metrics_out=" + d.dir + "/m.jsonl", "--cpus=" + worker_cpu});
  TestProcess worker("pstrain_worker", wargs, d.dir + "/worker.log");
  absl::SleepFor(absl::Seconds(1.5));
  ASSERT_TRUE(server.running());
  ASSERT_TRUE(worker.running());
  for (const auto& [pid, cpu] : {std::pair{server.pid(), server_cpu}, std::pair{worker.pid(), worker_cpu}}) {
    const std::vector<std::string> lists = ThreadCpuLists(pid);
    EXPECT_GE(lists.size(), 3u);  // main, ZeroMQ's I/O and reaper threads at least
    for (const std::string& l : lists) EXPECT_EQ(l, cpu) << "process " << pid;
  }
  TestProcess coordinator("pstrain_coordinator", {"--bind=" + coord, "--servers=1", "--workers=1"},
                          d.dir + "/coordinator.log");
  EXPECT_EQ(worker.Wait(absl::Minutes(2)), 0) << worker.Log();
  EXPECT_EQ(server.Wait(absl::Seconds(30)), 0) << server.Log();
  EXPECT_EQ(coordinator.Wait(absl::Seconds(30)), 0) << coordinator.Log();
  EXPECT_NE(server.Log().find("waiting for the coordinator"), std::string::npos);
  std::filesystem::remove_all(d.dir);
}

TEST(Cluster, CoordinatorReportsADeadServerWithRoleRankAndAddress) {
  std::string dir = MakeTempDir("pstrain-it");
  std::string endpoint_file = dir + "/coord";
  TestProcess coordinator("pstrain_coordinator",
                          {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + endpoint_file,
                           "--servers=2", "--workers=1", "--heartbeat_interval=0.2",
                           "--heartbeat_timeout=1.5"},
                          dir + "/coordinator.log");
  std::string coord = WaitForFileLine(endpoint_file, absl::Seconds(20));
  ASSERT_FALSE(coord.empty()) << coordinator.Log();
  TestProcess s0("pstrain_server", {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0", "--rank=0"},
                 dir + "/s0.log");
  TestProcess s1("pstrain_server", {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0", "--rank=1"},
                 dir + "/s1.log");
  absl::Time until = absl::Now() + absl::Seconds(20);
  while (coordinator.Log().find("server 1 joined") == std::string::npos && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  s1.Signal(SIGKILL);
  // The job cannot go on: the coordinator names the dead node and fails.
  EXPECT_EQ(coordinator.Wait(absl::Seconds(30)), 1) << coordinator.Log();
  std::string log = coordinator.Log();
  EXPECT_TRUE(std::regex_search(log, std::regex("server 1 \\(tcp://127\\.0\\.0\\.1:[0-9]+, host .*pid [0-9]+\\) is dead")))
      << log;
  // The surviving server was told the job failed and fails too (exit 1),
  // so that a restart policy on failure brings it back.
  EXPECT_EQ(s0.Wait(absl::Seconds(30)), 1) << s0.Log();
  EXPECT_NE(s0.Log().find("job aborted"), std::string::npos) << s0.Log();
  std::filesystem::remove_all(dir);
}

TEST(Cluster, LauncherStopsEveryoneAndFailsWhenAWorkerFails) {
  std::string dir = MakeTempDir("pstrain-it");
  // Its first lines pass the launcher's check; the workers then find that
  // most lines are malformed and fail.
  std::string data;
  for (int i = 0; i < 5; ++i) {
    data += "1";
    for (int d = 0; d < 13; ++d) data += "\t" + std::to_string(d);
    for (int c = 0; c < 26; ++c) data += "\tv" + std::to_string(c);
    data += "\n";
  }
  for (int i = 0; i < 5000; ++i) data += "not\ta\tcriteo\tline\n";
  ASSERT_TRUE(WriteFileAtomically(dir + "/mostly_bad.tsv", data).ok());
  TestProcess launcher("pstrain",
                       {"local", "--servers=1", "--workers=2", "--train_data=" + dir + "/mostly_bad.tsv",
                        "--timeout=120"},
                       dir + "/launcher.log");
  int code = launcher.Wait(absl::Minutes(2));
  EXPECT_EQ(code, 1) << launcher.Log();
  std::string log = launcher.Log();
  EXPECT_NE(log.find("exited with code"), std::string::npos) << log;
  EXPECT_NE(log.find("bad lines"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
