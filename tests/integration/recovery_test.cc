// Failures survived: a server killed with SIGKILL mid-run and restarted by
// the launcher (in ps, allreduce and pipeline mode), and a server frozen (SIGSTOP) past the heartbeat timeout and
// then resumed (in both the cluster rolls back to the latest checkpoint and
// the job finishes with the AUC of an unbroken run); a worker killed under
// BSP with elastic workers (dropped, its shard adopted), and such a worker
// coming back (re-admitted; or finishing when its shard was adopted).
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "data/reader.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

constexpr int kEvery = 25;  // checkpoint every this many steps

struct Job {
  std::string dir, train, eval;
};

Job MakeJob() {
  Job j;
  j.dir = MakeTempDir("pstrain-recovery");
  TrainEval data = WriteTrainEval(j.dir, /*seed=*/11, 200000, 20000);
  j.train = data.train;
  j.eval = data.eval;
  return j;
}

std::vector<std::string> JobArgs(const Job& j, const std::string& name) {
  return {"local", "--servers=2", "--workers=2", "--model=dlrm", "--consistency=bsp",
          "--batch_size=128", "--train_data=" + j.train, "--eval_data=" + j.eval,
          "--metrics_out=" + j.dir + "/" + name + ".jsonl",
          "--checkpoint_dir=" + j.dir + "/" + name + "-ckpt",
          absl::StrCat("--checkpoint_every_steps=", kEvery), "--heartbeat_interval=0.2",
          "--heartbeat_timeout=2", "--timeout=240"};
}

double LastAuc(const std::string& path) { return LastJsonNumber(path, "eval_auc"); }

// The first match of `re`'s group 1 in `text`, or -1.
int64_t FirstNumber(const std::string& text, const std::string& re) {
  std::smatch m;
  int64_t v = -1;
  if (std::regex_search(text, m, std::regex(re))) (void)absl::SimpleAtoi(m[1].str(), &v);
  return v;
}

// Waits until the launcher's log shows checkpoint `step` written.
bool WaitForCheckpoint(TestProcess& p, int step) {
  std::string want = absl::StrCat("checkpoint at step ", step, " written");
  absl::Time until = absl::Now() + absl::Seconds(60);
  while (absl::Now() < until && p.running()) {
    if (p.Log().find(want) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

// The last checkpoint written before `marker` appears in `log`.
int64_t LastCheckpointBefore(const std::string& log, const std::string& marker) {
  std::string before = log.substr(0, log.find(marker));
  std::regex re("checkpoint at step ([0-9]+) written");
  int64_t last = -1;
  for (auto it = std::sregex_iterator(before.begin(), before.end(), re); it != std::sregex_iterator(); ++it) {
    last = std::stoll((*it)[1].str());
  }
  return last;
}

class Recovery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { job_ = new Job(MakeJob()); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(job_->dir);
    delete job_;
  }
  static Job* job_;
};
Job* Recovery::job_ = nullptr;

// A job run twice on the same data: unbroken, then with server 1 killed
// (SIGKILL) after the checkpoint of step 2 * kEvery and restarted by the
// launcher (`mode_args` select the mode). Checks what every mode must show:
// the cluster rolled back and resumed from the last checkpoint written
// before the failure (at most kEvery steps redone), and the recovered job
// ends with the unbroken run's eval AUC (within 0.005).
struct KilledRun {
  double unbroken_auc = NAN, auc = NAN, unbroken_secs = 0, killed_secs = 0;
  int64_t resumed = -1;
  std::string log;
};

KilledRun RunUnbrokenThenKillServer1(const Job& j, const std::string& name,
                                     const std::vector<std::string>& mode_args, absl::Duration limit) {
  auto args_for = [&](const std::string& run) {
    std::vector<std::string> args = JobArgs(j, run);
    args.insert(args.end(), mode_args.begin(), mode_args.end());
    return args;
  };
  KilledRun r;
  absl::Time t0 = absl::Now();
  {
    TestProcess unbroken("pstrain", args_for(name + "-unbroken"), j.dir + "/" + name + "-unbroken.log");
    const int code = unbroken.Wait(limit);
    EXPECT_EQ(code, 0) << unbroken.Log();
    if (code != 0) return r;
    r.unbroken_auc = LastAuc(j.dir + "/" + name + "-unbroken.jsonl");
    EXPECT_GT(r.unbroken_auc, 0.6);
  }
  r.unbroken_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  std::vector<std::string> args = args_for(name + "-killed");
  args.push_back("--restart_failed");
  t0 = absl::Now();
  TestProcess launcher("pstrain", args, j.dir + "/" + name + "-killed.log");
  if (!WaitForCheckpoint(launcher, 2 * kEvery)) {
    ADD_FAILURE() << "no checkpoint of step " << 2 * kEvery << "\n" << launcher.Log();
    return r;
  }
  const auto server1 = static_cast<pid_t>(
      FirstNumber(launcher.Log(), "server 1 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)"));
  if (server1 <= 0 || kill(server1, SIGKILL) != 0) {
    ADD_FAILURE() << "could not kill server 1 (pid " << server1 << ")\n" << launcher.Log();
    return r;
  }
  const int code = launcher.Wait(limit);
  r.killed_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  r.log = launcher.Log();
  EXPECT_EQ(code, 0) << r.log;
  EXPECT_NE(r.log.find("server 1 exited with code 137; restarting it"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("recovered in"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("cannot recover"), std::string::npos) << r.log;
  int64_t last = LastCheckpointBefore(r.log, "was replaced by a new process");
  if (last < 0 || r.log.find("was replaced by a new process") == std::string::npos) {
    last = LastCheckpointBefore(r.log, "stopped responding");
  }
  EXPECT_GE(last, 2 * kEvery);
  r.resumed = FirstNumber(r.log, "resuming from step ([0-9]+)");
  EXPECT_EQ(r.resumed, last) << r.log;
  r.auc = LastAuc(j.dir + "/" + name + "-killed.jsonl");
  EXPECT_NEAR(r.auc, r.unbroken_auc, 0.005) << r.log;
  std::printf("%s: unbroken AUC %.5f (%.1fs), killed and restarted %.5f (%.1fs); resumed from step "
              "%lld, at most %d steps redone\n",
              name.c_str(), r.unbroken_auc, r.unbroken_secs, r.auc, r.killed_secs,
              static_cast<long long>(r.resumed), kEvery);
  return r;
}

TEST_F(Recovery, ServerKilledMidRunIsRestartedAndTheJobFinishesWithTheSameAuc) {
  KilledRun r = RunUnbrokenThenKillServer1(*job_, "ps", {}, absl::Minutes(4));
  EXPECT_NE(r.log.find("server 1 rejoined (a replacement)"), std::string::npos) << r.log;
}

// Allreduce mode: the dense tables live on the workers, so a server failure
// rolls back each worker's dense replica (weights and optimizer state) to
// the checkpoint the servers restore, and the workers rebuild their
// collective group. The recovered model is the same cut as an unbroken run's.
TEST_F(Recovery, AllreduceServerKilledMidRunRollsBackTheDenseReplicasAndKeepsTheAuc) {
  // Bounded: enough steps for checkpoints at 25, 50, ... and a kill after 50.
  RunUnbrokenThenKillServer1(*job_, "allreduce",
                             {"--mode=allreduce", "--max_steps=200", "--collective_timeout=20"},
                             absl::Minutes(2));
}

// Pipeline mode: every stage leaves its step on the failure (a stage
// waiting for its neighbour's activations included), rebuilds its links to
// its neighbours under the new epoch and resumes from the checkpoint's step,
// stage 0 at the checkpoint's data position. The recovered model is the same
// cut as an unbroken run's.
TEST_F(Recovery, PipelineServerKilledMidRunRebuildsTheStageLinksAndKeepsTheAuc) {
  // 2 stages of one replica (the job's 2 workers); bounded as above.
  KilledRun r = RunUnbrokenThenKillServer1(
      *job_, "pipeline", {"--mode=pipeline", "--stages=2", "--microbatches=2", "--max_steps=400"},
      absl::Seconds(60));
  const std::string& log = r.log;
  // Both stages left their step and resumed from the checkpoint.
  EXPECT_NE(log.find("stage 0 (worker 0) of replica 0: training interrupted"), std::string::npos) << log;
  EXPECT_NE(log.find("stage 1 (worker 1) of replica 0: training interrupted"), std::string::npos) << log;
  EXPECT_EQ(FirstNumber(log, "stage 0 of replica 0: resuming at step ([0-9]+)"), r.resumed) << log;
  EXPECT_EQ(FirstNumber(log, "stage 1 of replica 0: resuming at step ([0-9]+)"), r.resumed) << log;
}

TEST_F(Recovery, ServerFrozenPastTheHeartbeatTimeoutRollsBackAndTheJobFinishes) {
  TestProcess launcher("pstrain", JobArgs(*job_, "frozen"), job_->dir + "/frozen.log");
  ASSERT_TRUE(WaitForCheckpoint(launcher, 2 * kEvery)) << launcher.Log();
  pid_t server1 = static_cast<pid_t>(FirstNumber(launcher.Log(), "server 1 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)"));
  ASSERT_GT(server1, 0) << launcher.Log();
  ASSERT_EQ(kill(server1, SIGSTOP), 0);
  // Past the 2 s heartbeat timeout: declared dead, the others roll back.
  absl::Time until = absl::Now() + absl::Seconds(30);
  while (launcher.Log().find("stopped responding") == std::string::npos && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Seconds(1));
  ASSERT_EQ(kill(server1, SIGCONT), 0);
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  std::string log = launcher.Log();
  EXPECT_NE(log.find("server 1 is heard from again"), std::string::npos) << log;
  EXPECT_NE(log.find("recovered in"), std::string::npos) << log;
  EXPECT_EQ(FirstNumber(log, "resuming from step ([0-9]+)"), LastCheckpointBefore(log, "stopped responding"))
      << log;
  double auc = LastAuc(job_->dir + "/frozen.jsonl");
  std::printf("frozen and resumed: AUC %.5f\n", auc);
  EXPECT_GT(auc, 0.65) << log;
}

TEST_F(Recovery, WorkerKilledUnderBspIsDroppedAndItsRowsAreTrainedByAnother) {
  std::vector<std::string> args = {
      "local", "--servers=2", "--workers=3", "--model=dlrm", "--consistency=bsp", "--batch_size=128",
      "--train_data=" + job_->train, "--eval_data=" + job_->eval,
      "--metrics_out=" + job_->dir + "/elastic.jsonl", "--elastic_workers", "--heartbeat_interval=0.2",
      "--worker_timeout=2", "--timeout=240"};
  TestProcess launcher("pstrain", args, job_->dir + "/elastic.log");
  absl::Time until = absl::Now() + absl::Seconds(60);
  while (launcher.Log().find("tables created") == std::string::npos && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Seconds(1.5));
  pid_t worker2 = static_cast<pid_t>(FirstNumber(launcher.Log(), "worker 2 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)"));
  ASSERT_GT(worker2, 0) << launcher.Log();
  ASSERT_EQ(kill(worker2, SIGKILL), 0);
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  std::string log = launcher.Log();
  EXPECT_NE(log.find("worker 2 was killed"), std::string::npos) << log;
  EXPECT_NE(log.find("dropped from the job"), std::string::npos) << log;
  // The adopter read worker 2's shard the way it did: what it had trained
  // (skipped) plus what the adopter trained is the whole shard.
  std::smatch m;
  std::regex re("worker 2's shard done here: ([0-9]+) rows trained after its ([0-9]+) \\(the shard's ([0-9]+) rows");
  ASSERT_TRUE(std::regex_search(log, m, re)) << log;
  int64_t trained_here = std::stoll(m[1].str()), before = std::stoll(m[2].str()), total = std::stoll(m[3].str());
  EXPECT_GT(before, 0) << "killed before it trained anything";
  EXPECT_GT(trained_here, 0) << "killed after it had finished";
  EXPECT_EQ(total, ShardRows(job_->train, 2, 3));
  std::printf("worker 2 trained %lld rows, its adopter %lld more: %lld of the shard's %lld\n",
              static_cast<long long>(before), static_cast<long long>(trained_here),
              static_cast<long long>(before + trained_here), static_cast<long long>(total));
  EXPECT_GT(LastAuc(job_->dir + "/elastic.jsonl"), 0.65) << log;
}


// An elastic BSP job with 3 workers, evaluated every 100 steps (rounds
// while a worker is dropped, adopted or re-admitted): its arguments, and
// the launcher's.
std::vector<std::string> ElasticArgs(const Job& j, const std::string& name) {
  return {"local", "--servers=2", "--workers=3", "--model=dlrm", "--consistency=bsp",
          "--batch_size=128", "--train_data=" + j.train, "--eval_data=" + j.eval,
          "--metrics_out=" + j.dir + "/" + name + ".jsonl", "--eval_every_steps=100",
          "--elastic_workers", "--heartbeat_interval=0.2", "--worker_timeout=2", "--timeout=240"};
}

// Waits up to `timeout` for `text` in `p`'s log.
bool WaitForLog(TestProcess& p, const std::string& text, absl::Duration timeout) {
  absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until && p.running()) {
    if (p.Log().find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return p.Log().find(text) != std::string::npos;
}

// Kills worker 2 of `launcher` with SIGKILL a little after training began.
void KillWorker2(TestProcess& launcher) {
  ASSERT_TRUE(WaitForLog(launcher, "tables created", absl::Seconds(60))) << launcher.Log();
  // Mid-training: the whole job trains in about 1.5 s on an idle machine.
  absl::SleepFor(absl::Seconds(0.6));
  pid_t worker2 = static_cast<pid_t>(
      FirstNumber(launcher.Log(), "worker 2 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)"));
  ASSERT_GT(worker2, 0) << launcher.Log();
  ASSERT_EQ(kill(worker2, SIGKILL), 0);
}

// Worker 0, the lead (it gathers the evaluation and writes the summary),
// killed: worker 1 takes the lead over, its shard is adopted like any other
// (every row of it trained: what it had trained plus what its adopter
// trained is the whole shard), and the job ends with a summary in
// --metrics_out, evaluation rounds during training included.
TEST_F(Recovery, Worker0KilledUnderBspHandsTheLeadOnAndItsRowsAreTrainedByAnother) {
  absl::Time t0 = absl::Now();
  const std::string metrics = job_->dir + "/lead.jsonl";
  std::vector<std::string> args = ElasticArgs(*job_, "lead");
  args.push_back("--eval_every_steps=100");
  TestProcess launcher("pstrain", args, job_->dir + "/lead.log");
  ASSERT_TRUE(WaitForLog(launcher, "tables created", absl::Seconds(60))) << launcher.Log();
  absl::SleepFor(absl::Seconds(1.5));
  pid_t worker0 = static_cast<pid_t>(
      FirstNumber(launcher.Log(), "worker 0 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)"));
  ASSERT_GT(worker0, 0) << launcher.Log();
  ASSERT_EQ(kill(worker0, SIGKILL), 0);
  ASSERT_EQ(launcher.Wait(absl::Seconds(60)), 0) << launcher.Log();
  std::string log = launcher.Log();
  EXPECT_NE(log.find("worker 0 was killed"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 1 is the lead worker now, in place of worker 0"), std::string::npos) << log;
  std::smatch m;
  std::regex re("worker 0's shard done here: ([0-9]+) rows trained after its ([0-9]+) \\(the shard's ([0-9]+) rows");
  ASSERT_TRUE(std::regex_search(log, m, re)) << log;
  int64_t trained_here = std::stoll(m[1].str()), before = std::stoll(m[2].str()), total = std::stoll(m[3].str());
  EXPECT_GT(before, 0) << "killed before it trained anything";
  EXPECT_GT(trained_here, 0) << "killed after it had finished";
  EXPECT_EQ(total, ShardRows(job_->train, 0, 3));
  // The summary, written by the new lead, with an evaluation AUC.
  auto text = ReadFileToString(metrics);
  ASSERT_TRUE(text.ok()) << text.status();
  std::string summary;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::StrContains(line, "summary")) summary = std::string(line);
  }
  ASSERT_FALSE(summary.empty()) << *text << log;
  EXPECT_TRUE(absl::StrContains(summary, "eval_auc")) << summary;
  double auc = LastAuc(metrics);
  int evals = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) evals += absl::StrContains(line, "\"eval\"");
  std::printf("worker 0 trained %lld rows, its adopter %lld more: %lld of the shard's %lld; %d eval "
              "lines and the summary in --metrics_out, AUC %.4f; %.1fs\n",
              static_cast<long long>(before), static_cast<long long>(trained_here),
              static_cast<long long>(before + trained_here), static_cast<long long>(total), evals,
              auc, absl::ToDoubleSeconds(absl::Now() - t0));
  EXPECT_GT(auc, 0.65) << *text << log;
}

// A new worker 2 process for `launcher`'s cluster, started by hand.
std::unique_ptr<TestProcess> StartWorker2(const Job& j, TestProcess& launcher, const std::string& log) {
  std::smatch m;
  std::string text = launcher.Log();
  EXPECT_TRUE(std::regex_search(text, m, std::regex("coordinator at ([^ ;]+);"))) << text;
  return std::make_unique<TestProcess>(
      "pstrain_worker",
      std::vector<std::string>{"--coordinator=" + m[1].str(), "--bind=tcp://127.0.0.1:0", "--rank=2",
                               "--model=dlrm", "--batch_size=128", "--train_data=" + j.train,
                               "--eval_data=" + j.eval, "--eval_every_steps=100"},
      log);
}

// Worker 2 killed, dropped past --worker_timeout, then started again before
// anyone adopted its shard: re-admitted at a step no server had passed, it
// trains the rest of its own shard, and the job finishes with every row of
// that shard trained once from the recorded position.
TEST_F(Recovery, DroppedWorkerStartedAgainIsReadmittedAndTrainsTheRestOfItsShard) {
  absl::Time t0 = absl::Now();
  TestProcess launcher("pstrain", ElasticArgs(*job_, "readmit"), job_->dir + "/readmit.log");
  KillWorker2(launcher);
  ASSERT_TRUE(WaitForLog(launcher, "dropped from the job", absl::Seconds(30))) << launcher.Log();
  auto worker2 = StartWorker2(*job_, launcher, job_->dir + "/readmit-worker2.log");
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log() << worker2->Log();
  ASSERT_EQ(worker2->Wait(absl::Seconds(30)), 0) << worker2->Log();
  std::string log = launcher.Log(), wlog = worker2->Log();
  EXPECT_EQ(log.find("adopts the rest of worker 2's shard"), std::string::npos) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex("worker 2 re-admitted at step ([0-9]+), resuming its shard at epoch ([0-9]+) row ([0-9]+)")))
      << log;
  int64_t step = std::stoll(m[1].str()), rows_before = std::stoll(m[3].str());
  EXPECT_EQ(std::stoll(m[2].str()), 0);
  ASSERT_TRUE(std::regex_search(wlog, m, std::regex("trained ([0-9]+) steps, ([0-9]+) samples"))) << wlog;
  int64_t last_step = std::stoll(m[1].str()), rows_after = std::stoll(m[2].str());
  int64_t shard = ShardRows(job_->train, 2, 3);
  EXPECT_GT(rows_before, 0) << "killed before it trained anything";
  EXPECT_GT(last_step, step) << "trained nothing after its return";
  // Its rows before the drop and after the return are the whole shard, none twice.
  EXPECT_EQ(rows_before + rows_after, shard) << wlog;
  EXPECT_NE(wlog.find(absl::StrCat("resuming at step ", step, " (epoch 0, ", rows_before, " rows skipped")),
            std::string::npos)
      << wlog;
  double auc = LastAuc(job_->dir + "/readmit.jsonl");
  std::printf("worker 2 trained %lld rows, was re-admitted at step %lld and trained %lld more rows in "
              "%lld steps: %lld of the shard's %lld; AUC %.4f; %.1fs\n",
              static_cast<long long>(rows_before), static_cast<long long>(step),
              static_cast<long long>(rows_after), static_cast<long long>(last_step - step),
              static_cast<long long>(rows_before + rows_after), static_cast<long long>(shard), auc,
              absl::ToDoubleSeconds(absl::Now() - t0));
  EXPECT_GT(auc, 0.65) << log;
}

// Worker 2 comes back after another worker adopted its shard: it trains
// nothing (its rows are the adopter's), finishes cleanly, and the job ends
// with the shard trained once by the two of them.
TEST_F(Recovery, WorkerReturningAfterItsShardWasAdoptedFinishesWithoutTraining) {
  absl::Time t0 = absl::Now();
  TestProcess launcher("pstrain", ElasticArgs(*job_, "adopted"), job_->dir + "/adopted.log");
  KillWorker2(launcher);
  ASSERT_TRUE(WaitForLog(launcher, "adopts the rest of worker 2's shard", absl::Seconds(180)))
      << launcher.Log();
  auto worker2 = StartWorker2(*job_, launcher, job_->dir + "/adopted-worker2.log");
  ASSERT_EQ(worker2->Wait(absl::Seconds(60)), 0) << worker2->Log();
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  std::string log = launcher.Log(), wlog = worker2->Log();
  EXPECT_NE(wlog.find("nothing is left for this worker to train"), std::string::npos) << wlog;
  EXPECT_EQ(wlog.find("trained "), std::string::npos) << wlog;
  EXPECT_NE(log.find("adopted its shard"), std::string::npos) << log;
  EXPECT_EQ(log.find("worker 2 re-admitted"), std::string::npos) << log;
  std::smatch m;
  std::regex re("worker 2's shard done here: ([0-9]+) rows trained after its ([0-9]+) \\(the shard's ([0-9]+) rows");
  ASSERT_TRUE(std::regex_search(log, m, re)) << log;
  int64_t total = std::stoll(m[3].str());
  EXPECT_EQ(total, ShardRows(job_->train, 2, 3));
  double auc = LastAuc(job_->dir + "/adopted.jsonl");
  std::printf("worker 2 trained %s rows, its adopter %s more (%lld of the shard's); it came back and "
              "finished without training; AUC %.4f; %.1fs\n",
              m[2].str().c_str(), m[1].str().c_str(), static_cast<long long>(total), auc,
              absl::ToDoubleSeconds(absl::Now() - t0));
  EXPECT_GT(auc, 0.65) << log;
}

// `pstrain local --restart_failed --elastic_workers` restarts a killed
// worker at once, before --worker_timeout: the coordinator drops the old
// process and re-admits the new one.
TEST_F(Recovery, KilledWorkerRestartedByTheLauncherIsReadmitted) {
  absl::Time t0 = absl::Now();
  std::vector<std::string> args = ElasticArgs(*job_, "restarted");
  args.push_back("--restart_failed");
  args.push_back("--worker_timeout=20");  // restarted long before it would be declared dead
  TestProcess launcher("pstrain", args, job_->dir + "/restarted.log");
  KillWorker2(launcher);
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  std::string log = launcher.Log();
  EXPECT_NE(log.find("worker 2 exited with code 137; restarting it"), std::string::npos) << log;
  EXPECT_NE(log.find("was replaced by a new process"), std::string::npos) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex("worker 2 re-admitted at step ([0-9]+), resuming its shard at epoch 0 row ([0-9]+)")))
      << log;
  int64_t step = std::stoll(m[1].str()), rows_before = std::stoll(m[2].str());
  ASSERT_TRUE(std::regex_search(log, m, std::regex("\\[worker 2\\] [^\\n]*trained ([0-9]+) steps, ([0-9]+) samples")))
      << log;
  int64_t last_step = std::stoll(m[1].str()), rows_after = std::stoll(m[2].str());
  EXPECT_GT(last_step, step);
  EXPECT_EQ(rows_before + rows_after, ShardRows(job_->train, 2, 3)) << log;
  double auc = LastAuc(job_->dir + "/restarted.jsonl");
  std::printf("restarted worker 2 re-admitted at step %lld: %lld + %lld rows of its shard; AUC %.4f; %.1fs\n",
              static_cast<long long>(step), static_cast<long long>(rows_before),
              static_cast<long long>(rows_after), auc, absl::ToDoubleSeconds(absl::Now() - t0));
  EXPECT_GT(auc, 0.65) << log;
}

}  // namespace
}  // namespace pstrain::testing
