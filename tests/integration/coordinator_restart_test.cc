// Ranks and jobs that survive restarts, with real processes on 127.0.0.1:
// the coordinator killed (SIGKILL) under `pstrain local --restart_failed`
// takes the job back from its journal with no step redone and the AUC of an
// unbroken run; a worker with a --node_id killed and started again is
// re-admitted to its rank; a server restarted with its fixed rank replaces
// the old one at once; and without a checkpoint folder a lost coordinator
// ends every node with a non-zero exit naming why, within the bound (while
// it is gone, pstrain health says the nodes are unhealthy).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

struct Job {
  std::string dir, train, eval;
};

Job MakeJob() {
  Job j;
  j.dir = MakeTempDir("pstrain-coord-restart");
  TrainEval data = WriteTrainEval(j.dir, /*seed=*/11, 200000, 20000);
  j.train = data.train;
  j.eval = data.eval;
  return j;
}

class CoordinatorRestart : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { job_ = new Job(MakeJob()); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(job_->dir);
    delete job_;
  }
  static Job* job_;
};
Job* CoordinatorRestart::job_ = nullptr;

bool WaitForLog(TestProcess& p, const std::string& text, absl::Duration timeout) {
  absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until && p.running()) {
    if (p.Log().find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return p.Log().find(text) != std::string::npos;
}

// Group 1 of the first match of `re` in `text`, or "".
std::string Match(const std::string& text, const std::string& re) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(re)) ? m[1].str() : std::string();
}
int64_t MatchNumber(const std::string& text, const std::string& re) {
  int64_t v = -1;
  (void)absl::SimpleAtoi(Match(text, re), &v);
  return v;
}

std::vector<std::string> LocalArgs(const Job& j, const std::string& name) {
  return {"local", "--servers=2", "--workers=2", "--model=dlrm", "--consistency=bsp",
          "--batch_size=128", "--train_data=" + j.train, "--eval_data=" + j.eval,
          "--metrics_out=" + j.dir + "/" + name + ".jsonl",
          "--checkpoint_dir=" + j.dir + "/" + name + "-ckpt", "--checkpoint_every_steps=25",
          "--heartbeat_interval=0.2", "--heartbeat_timeout=2", "--timeout=240"};
}

TEST_F(CoordinatorRestart, CoordinatorKilledUnderTheLauncherTakesTheJobBackWithNoStepRedone) {
  const std::string dir = job_->dir;
  absl::Time t0 = absl::Now();
  {
    TestProcess unbroken("pstrain", LocalArgs(*job_, "unbroken"), dir + "/unbroken.log");
    ASSERT_EQ(unbroken.Wait(absl::Minutes(4)), 0) << unbroken.Log();
  }
  const double unbroken_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  const double unbroken_auc = LastJsonNumber(dir + "/unbroken.jsonl", "eval_auc");
  const double unbroken_steps = LastJsonNumber(dir + "/unbroken.jsonl", "steps");
  ASSERT_GT(unbroken_auc, 0.6);

  std::vector<std::string> args = LocalArgs(*job_, "killed");
  args.push_back("--restart_failed");
  t0 = absl::Now();
  TestProcess launcher("pstrain", args, dir + "/killed.log");
  ASSERT_TRUE(WaitForLog(launcher, "checkpoint at step 50 written", absl::Seconds(60))) << launcher.Log();
  // The coordinator is the launcher's first child.
  const std::string children = launcher.Log();
  pid_t pid = -1;
  {
    std::string out;
    FILE* f = popen(absl::StrCat("pgrep -P ", launcher.pid(), " pstrain_coordin").c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[64];
    while (fgets(buf, sizeof buf, f) != nullptr) out += buf;
    pclose(f);
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &pid);
  }
  ASSERT_GT(pid, 0) << children;
  const absl::Time killed = absl::Now();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WaitForLog(launcher, "job taken back in", absl::Seconds(30))) << launcher.Log();
  const double recovery_secs = absl::ToDoubleSeconds(absl::Now() - killed);
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  const double killed_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  const std::string log = launcher.Log();
  EXPECT_NE(log.find("coordinator exited with code 137; restarting it"), std::string::npos) << log;
  EXPECT_NE(log.find("no rollback"), std::string::npos) << log;
  EXPECT_EQ(log.find("resuming from step"), std::string::npos) << log;  // no worker rolled back
  EXPECT_EQ(log.find("recovering"), std::string::npos) << log;
  const double steps = LastJsonNumber(dir + "/killed.jsonl", "steps");
  const double samples = LastJsonNumber(dir + "/killed.jsonl", "train_samples");
  EXPECT_EQ(steps, unbroken_steps) << log;
  EXPECT_EQ(samples, 200000) << log;
  const double auc = LastJsonNumber(dir + "/killed.jsonl", "eval_auc");
  EXPECT_NEAR(auc, unbroken_auc, 0.005) << log;
  std::printf("coordinator killed after step 50: job taken back %.2fs after the kill (%s); steps "
              "%.0f vs %.0f unbroken (%.0f redone); AUC %.5f vs %.5f unbroken; %.1fs vs %.1fs\n",
              recovery_secs, Match(log, "(job taken back in [0-9.]+s)").c_str(), steps,
              unbroken_steps, steps - unbroken_steps, auc, unbroken_auc, killed_secs, unbroken_secs);
  // A coordinator started again on the finished job's folder says so, and
  // waits for the job's nodes to tell them (here none come: at most
  // --join_timeout, then it exits 0 all the same).
  TestProcess again("pstrain_coordinator",
                    {"--bind=tcp://127.0.0.1:0", "--servers=2", "--workers=2", "--join_timeout=1",
                     "--checkpoint_dir=" + dir + "/killed-ckpt"},
                    dir + "/again.log");
  ASSERT_EQ(again.Wait(absl::Seconds(30)), 0) << again.Log();
  EXPECT_NE(again.Log().find(absl::StrCat("finished at step ", static_cast<int64_t>(steps))),
            std::string::npos)
      << again.Log();
  EXPECT_NE(again.Log().find("told 0 of 2 servers and 0 of 2 workers"), std::string::npos)
      << again.Log();
}

// The processes of a cluster started by hand: a coordinator on a free port.
struct Cluster {
  std::string endpoint;
  std::unique_ptr<TestProcess> coordinator;
  std::vector<std::unique_ptr<TestProcess>> servers, workers;
};

// A server of the cluster at `endpoint`, with one more flag (its rank, a bound).
std::unique_ptr<TestProcess> StartServer(const std::string& endpoint, const std::string& flag,
                                         const std::string& log) {
  return std::make_unique<TestProcess>(
      "pstrain_server",
      std::vector<std::string>{"--coordinator=" + endpoint, "--bind=tcp://127.0.0.1:0", flag}, log);
}

std::vector<std::string> WorkerArgs(const Job& j, const std::string& endpoint) {
  return {"--coordinator=" + endpoint, "--bind=tcp://127.0.0.1:0", "--model=dlrm",
          "--batch_size=128", "--train_data=" + j.train, "--eval_data=" + j.eval};
}

TEST_F(CoordinatorRestart, WorkerWithANodeIdKilledAndRestartedIsReadmittedToItsRank) {
  const std::string dir = job_->dir;
  Cluster c;
  c.endpoint = absl::StrCat("tcp://127.0.0.1:", FreePort());
  c.coordinator = std::make_unique<TestProcess>(
      "pstrain_coordinator",
      std::vector<std::string>{"--bind=" + c.endpoint, "--servers=2", "--workers=3",
                               "--consistency=bsp", "--elastic_workers", "--heartbeat_interval=0.2",
                               "--worker_timeout=20"},
      dir + "/ids-coordinator.log");
  for (int s = 0; s < 2; ++s) {
    c.servers.push_back(StartServer(c.endpoint, absl::StrCat("--rank=", s),
                                    absl::StrCat(dir, "/ids-server", s, ".log")));
  }
  const std::vector<std::string> ids = {"host-a", "host-b", "host-c"};
  for (const std::string& id : ids) {
    std::vector<std::string> a = WorkerArgs(*job_, c.endpoint);
    a.push_back("--node_id=" + id);
    c.workers.push_back(std::make_unique<TestProcess>("pstrain_worker", a, dir + "/ids-" + id + ".log"));
  }
  ASSERT_TRUE(WaitForLog(*c.coordinator, "tables created", absl::Seconds(60))) << c.coordinator->Log();
  absl::SleepFor(absl::Seconds(1.5));
  const std::string log = c.coordinator->Log();
  // Whichever identity holds rank 2 (worker 0, the lead, is not re-admitted).
  const std::string id = Match(log, "worker 2 joined from [^ ]+ \\(host [^,]+, pid [0-9]+, node ([^)]+)\\)");
  ASSERT_FALSE(id.empty()) << log;
  const size_t which = std::find(ids.begin(), ids.end(), id) - ids.begin();
  ASSERT_LT(which, ids.size());
  c.workers[which]->Signal(SIGKILL);
  ASSERT_EQ(c.workers[which]->Wait(absl::Seconds(10)), 128 + SIGKILL);
  std::vector<std::string> a = WorkerArgs(*job_, c.endpoint);
  a.push_back("--node_id=" + id);  // no --rank: its identity gives it
  auto again = std::make_unique<TestProcess>("pstrain_worker", a, dir + "/ids-again.log");
  ASSERT_EQ(c.coordinator->Wait(absl::Minutes(3)), 0) << c.coordinator->Log();
  ASSERT_EQ(again->Wait(absl::Seconds(30)), 0) << again->Log();
  const std::string end = c.coordinator->Log();
  EXPECT_NE(end.find("was replaced by a new process"), std::string::npos) << end;
  const int64_t step = MatchNumber(end, "worker 2 re-admitted at step ([0-9]+)");
  EXPECT_GT(step, 0) << end;
  EXPECT_NE(again->Log().find("worker 2 of 3"), std::string::npos) << again->Log();
  for (size_t w = 0; w < c.workers.size(); ++w) {
    if (w != which) {
      EXPECT_EQ(c.workers[w]->Wait(absl::Seconds(30)), 0) << c.workers[w]->Log();
    }
  }
  for (auto& s : c.servers) EXPECT_EQ(s->Wait(absl::Seconds(30)), 0) << s->Log();
  std::printf("%s (worker 2) killed and started again with its --node_id: re-admitted to rank 2 at "
              "step %lld\n",
              id.c_str(), static_cast<long long>(step));
}

TEST_F(CoordinatorRestart, ServerRestartedWithItsFixedRankReplacesTheOldOneAtOnce) {
  const std::string dir = job_->dir;
  Cluster c;
  c.endpoint = absl::StrCat("tcp://127.0.0.1:", FreePort());
  c.coordinator = std::make_unique<TestProcess>(
      "pstrain_coordinator",
      std::vector<std::string>{"--bind=" + c.endpoint, "--servers=2", "--workers=2",
                               "--consistency=bsp", "--heartbeat_interval=0.2",
                               "--heartbeat_timeout=10", "--checkpoint_dir=" + dir + "/rank-ckpt",
                               "--checkpoint_every_steps=25"},
      dir + "/rank-coordinator.log");
  auto server = [&](int s, const std::string& log) {
    return StartServer(c.endpoint, absl::StrCat("--rank=", s), log);
  };
  for (int s = 0; s < 2; ++s) c.servers.push_back(server(s, absl::StrCat(dir, "/rank-server", s, ".log")));
  for (int w = 0; w < 2; ++w) {
    c.workers.push_back(std::make_unique<TestProcess>(
        "pstrain_worker", WorkerArgs(*job_, c.endpoint), absl::StrCat(dir, "/rank-worker", w, ".log")));
  }
  ASSERT_TRUE(WaitForLog(*c.coordinator, "checkpoint at step 50 written", absl::Seconds(60)))
      << c.coordinator->Log();
  c.servers[1]->Signal(SIGKILL);
  ASSERT_EQ(c.servers[1]->Wait(absl::Seconds(10)), 128 + SIGKILL);
  const absl::Time restarted = absl::Now();
  auto again = server(1, dir + "/rank-server1-again.log");
  ASSERT_TRUE(WaitForLog(*c.coordinator, "server 1 rejoined (a replacement)", absl::Seconds(8)))
      << c.coordinator->Log();
  const double replaced_secs = absl::ToDoubleSeconds(absl::Now() - restarted);
  EXPECT_LT(replaced_secs, 5.0) << "replaced only after the heartbeat timeout";
  ASSERT_EQ(c.coordinator->Wait(absl::Minutes(3)), 0) << c.coordinator->Log();
  EXPECT_EQ(c.coordinator->Log().find("slots are taken"), std::string::npos) << c.coordinator->Log();
  EXPECT_EQ(again->Wait(absl::Seconds(30)), 0) << again->Log();
  std::printf("server 1 restarted with --rank=1: replaced %.2fs after it started (heartbeat timeout "
              "10s)\n",
              replaced_secs);
}

TEST_F(CoordinatorRestart, CoordinatorLostWithoutACheckpointDirEndsTheNodesNamingWhy) {
  const std::string dir = job_->dir;
  Cluster c;
  c.endpoint = absl::StrCat("tcp://127.0.0.1:", FreePort());
  c.coordinator = std::make_unique<TestProcess>(
      "pstrain_coordinator",
      std::vector<std::string>{"--bind=" + c.endpoint, "--servers=1", "--workers=1",
                               "--heartbeat_interval=0.2"},
      dir + "/lost-coordinator.log");
  c.servers.push_back(StartServer(c.endpoint, "--coordinator_timeout=4", dir + "/lost-server.log"));
  std::vector<std::string> a = WorkerArgs(*job_, c.endpoint);
  a.push_back("--coordinator_timeout=4");
  a.push_back("--epochs=20");  // still training when the bound passes
  c.workers.push_back(std::make_unique<TestProcess>("pstrain_worker", a, dir + "/lost-worker.log"));
  ASSERT_TRUE(WaitForLog(*c.coordinator, "tables created", absl::Seconds(60))) << c.coordinator->Log();
  const std::string server_endpoint =
      Match(c.servers[0]->Log(), "server 0 serving at (tcp://[0-9.:]+)");
  ASSERT_FALSE(server_endpoint.empty()) << c.servers[0]->Log();
  const std::string worker_endpoint =
      Match(c.workers[0]->Log(), "worker 0 of 1 at (tcp://[0-9.:]+)");
  ASSERT_FALSE(worker_endpoint.empty()) << c.workers[0]->Log();
  auto health = [&](const std::string& endpoint, const std::string& name) {
    TestProcess h("pstrain", {"health", "--endpoint=" + endpoint, "--timeout=2"},
                  dir + "/" + name + ".log");
    return h.Wait(absl::Seconds(10));
  };
  EXPECT_EQ(health(server_endpoint, "health-server-before"), 0);
  EXPECT_EQ(health(worker_endpoint, "health-worker-before"), 0);
  const absl::Time killed = absl::Now();
  c.coordinator->Signal(SIGKILL);
  ASSERT_TRUE(WaitForLog(*c.servers[0], "lost the coordinator", absl::Seconds(5))) << c.servers[0]->Log();
  ASSERT_TRUE(WaitForLog(*c.workers[0], "lost the coordinator", absl::Seconds(5))) << c.workers[0]->Log();
  EXPECT_EQ(health(server_endpoint, "health-server-lost"), 1);
  EXPECT_EQ(health(worker_endpoint, "health-worker-lost"), 1);
  const int server_code = c.servers[0]->Wait(absl::Seconds(15));
  const int worker_code = c.workers[0]->Wait(absl::Seconds(15));
  const double secs = absl::ToDoubleSeconds(absl::Now() - killed);
  EXPECT_EQ(server_code, 1) << c.servers[0]->Log();
  EXPECT_EQ(worker_code, 3) << c.workers[0]->Log();
  for (auto* p : {c.servers[0].get(), c.workers[0].get()}) {
    EXPECT_NE(p->Log().find("keeps no journal (no --checkpoint_dir): the job cannot be resumed"),
              std::string::npos)
        << p->Log();
  }
  std::printf("coordinator killed without a checkpoint folder: server exit %d, worker exit %d, "
              "%.1fs after the kill (bound 4s + 2s to notice)\n",
              server_code, worker_code, secs);
}

}  // namespace
}  // namespace pstrain::testing
