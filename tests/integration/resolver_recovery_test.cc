// Issue 16 with real processes: the nodes reach each other by name, as in
// Docker or Kubernetes, and the names are scripted through the
// PSTRAIN_TEST_HOSTS_FILE hook (common/process.h). Server 1 is killed with
// SIGKILL and its name left to hang (a stopped container leaving the DNS,
// its lookups never answered), also for a while after its replacement
// started, and then answers with another address (127.0.0.2). The healthy
// nodes' heartbeats must go on throughout: no node but server 1 is
// declared dead, the cluster rolls back to its latest checkpoint, and the
// job completes with the AUC of an unbroken run.
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

constexpr int kEvery = 20;  // checkpoint every this many steps
const char* const kCoordinatorName = "coordinator.pstrain-test";
const char* const kServerNames[] = {"server0.pstrain-test", "server1.pstrain-test"};

class Names {
 public:
  explicit Names(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // Writes every name's answer; server 1's is `server1`.
  void Write(const std::string& server1) const {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << kCoordinatorName << " 127.0.0.1\n"
                       << kServerNames[0] << " 127.0.0.1\n"
                       << kServerNames[1] << " " << server1 << "\n";
    std::filesystem::rename(tmp, path_);  // readers see the old or the new file
  }

 private:
  std::string path_;
};

struct Cluster {
  std::string dir, train, eval;
  int coordinator_port = 0;
  int server_ports[2] = {0, 0};
  std::unique_ptr<TestProcess> coordinator;
  std::unique_ptr<TestProcess> servers[2];
  std::unique_ptr<TestProcess> workers[2];
  int server1_starts = 0;

  std::string CoordinatorEndpoint() const {
    return absl::StrCat("tcp://", kCoordinatorName, ":", coordinator_port);
  }
  std::string Log(const std::string& name) const { return dir + "/" + name + ".log"; }

  void StartServer(int rank, const std::string& run) {
    std::string label = absl::StrCat(run, "-server", rank);
    if (rank == 1 && server1_starts++ > 0) absl::StrAppend(&label, "-again");
    servers[rank] = std::make_unique<TestProcess>(
        "pstrain_server",
        std::vector<std::string>{"--coordinator=" + CoordinatorEndpoint(),
                                 absl::StrCat("--bind=tcp://0.0.0.0:", server_ports[rank]),
                                 absl::StrCat("--advertise_host=", kServerNames[rank]),
                                 absl::StrCat("--rank=", rank), "--log_level=info"},
        Log(label));
  }

  void Start(const std::string& run) {
    coordinator_port = FreePort();
    for (int& p : server_ports) p = FreePort();
    server1_starts = 0;
    coordinator = std::make_unique<TestProcess>(
        "pstrain_coordinator",
        std::vector<std::string>{
            absl::StrCat("--bind=tcp://0.0.0.0:", coordinator_port),
            absl::StrCat("--advertise_host=", kCoordinatorName), "--servers=2", "--workers=2",
            "--consistency=bsp", "--heartbeat_interval=0.2", "--heartbeat_timeout=2",
            "--checkpoint_dir=" + dir + "/" + run + "-ckpt",
            absl::StrCat("--checkpoint_every_steps=", kEvery)},
        Log(run + "-coordinator"));
    for (int r = 0; r < 2; ++r) StartServer(r, run);
    for (int r = 0; r < 2; ++r) {
      workers[r] = std::make_unique<TestProcess>(
          "pstrain_worker",
          std::vector<std::string>{"--coordinator=" + CoordinatorEndpoint(),
                                   "--bind=tcp://127.0.0.1:0", absl::StrCat("--rank=", r),
                                   "--model=dlrm", "--batch_size=128", "--train_data=" + train,
                                   "--eval_data=" + eval,
                                   "--metrics_out=" + dir + "/" + run + ".jsonl",
                                   "--log_every_secs=5"},
          Log(absl::StrCat(run, "-worker", r)));
    }
  }

  // Waits for the coordinator and the workers to exit; their exit codes.
  std::vector<int> Wait(absl::Duration limit) {
    const absl::Time until = absl::Now() + limit;
    std::vector<int> codes;
    codes.push_back(coordinator->Wait(until - absl::Now()));
    for (auto& w : workers) codes.push_back(w->Wait(std::max(until - absl::Now(), absl::ZeroDuration())));
    for (auto& s : servers) s->Wait(std::max(until - absl::Now(), absl::Seconds(5)));
    return codes;
  }
};

bool WaitForLog(TestProcess& p, const std::string& want, absl::Duration limit) {
  const absl::Time until = absl::Now() + limit;
  while (absl::Now() < until && p.running()) {
    if (p.Log().find(want) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return p.Log().find(want) != std::string::npos;
}

class ResolverRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.dir = MakeTempDir("pstrain-resolver");
    TrainEval data = WriteTrainEval(c_.dir, /*seed=*/11, 50000, 10000);
    c_.train = data.train;
    c_.eval = data.eval;
    names_ = std::make_unique<Names>(c_.dir + "/hosts");
    names_->Write("127.0.0.1");
    // Inherited by every process started below.
    setenv("PSTRAIN_TEST_HOSTS_FILE", names_->path().c_str(), 1);
  }
  void TearDown() override {
    unsetenv("PSTRAIN_TEST_HOSTS_FILE");
    if (!HasFailure()) std::filesystem::remove_all(c_.dir);
  }

  Cluster c_;
  std::unique_ptr<Names> names_;
};

TEST_F(ResolverRecovery, ServerKilledWhileItsNameHangsRecoversAndNoHealthyNodeIsDeclaredDead) {
  // Unbroken, by name.
  absl::Time t0 = absl::Now();
  c_.Start("unbroken");
  std::vector<int> codes = c_.Wait(absl::Seconds(60));
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0})) << c_.coordinator->Log();
  const double unbroken_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  const double unbroken_auc = LastJsonNumber(c_.dir + "/unbroken.jsonl", "eval_auc");
  ASSERT_GT(unbroken_auc, 0.6);

  // Killed after the checkpoint of step 2 * kEvery, and its name hangs
  // from then on (its container stopped); restarted once the coordinator
  // found it dead, its name still hanging for 3 s more (past the heartbeat
  // timeout): the coordinator connects to the replacement by that name and
  // every lookup hangs. Then the name answers again, with 127.0.0.2.
  t0 = absl::Now();
  c_.Start("killed");
  ASSERT_TRUE(WaitForLog(*c_.coordinator, absl::StrCat("checkpoint at step ", 2 * kEvery, " written"),
                         absl::Seconds(40)))
      << c_.coordinator->Log();
  names_->Write("hang");
  const absl::Time killed = absl::Now();
  c_.servers[1]->Signal(SIGKILL);
  ASSERT_TRUE(WaitForLog(*c_.coordinator, "stopped responding", absl::Seconds(10)))
      << c_.coordinator->Log();
  c_.StartServer(1, "killed");
  ASSERT_TRUE(WaitForLog(*c_.coordinator, "server 1 rejoined", absl::Seconds(10)))
      << c_.coordinator->Log();
  absl::SleepFor(absl::Seconds(3));
  names_->Write("127.0.0.2");
  const absl::Time answered = absl::Now();
  const bool recovered = WaitForLog(*c_.coordinator, "recovered in", absl::Seconds(30));
  const absl::Time recovered_at = absl::Now();
  codes = c_.Wait(absl::Seconds(60));
  const std::string log = c_.coordinator->Log();
  ASSERT_TRUE(recovered) << log;
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0})) << log;
  const double killed_secs = absl::ToDoubleSeconds(absl::Now() - t0);
  // The only death: server 1's.
  const std::regex dead("(server|worker) ([0-9]+) \\([^)]*\\) is dead");
  int deaths = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), dead); it != std::sregex_iterator(); ++it) {
    ++deaths;
    EXPECT_TRUE((*it)[1] == "server" && (*it)[2] == "1") << "a healthy node declared dead:" << (*it)[0];
  }
  EXPECT_EQ(deaths, 1) << log;
  EXPECT_EQ(log.find("job ends"), std::string::npos) << log;
  // The coordinator's lookups of the name hung while the heartbeats went
  // on, and it followed the name to its new address.
  EXPECT_NE(log.find("lookup of server1.pstrain-test took longer than"), std::string::npos) << log;
  EXPECT_NE(log.find("server1.pstrain-test resolves again, to 127.0.0.2"), std::string::npos) << log;
  const double auc = LastJsonNumber(c_.dir + "/killed.jsonl", "eval_auc");
  EXPECT_NEAR(auc, unbroken_auc, 0.005) << log;
  std::printf("unbroken: AUC %.5f in %.1f s; server 1 killed, its name hanging %.1f s (3 s of it "
              "with the replacement up), back at 127.0.0.2: AUC %.5f in %.1f s; recovered %.1f s "
              "after the kill, %.1f s after the name answered again\n",
              unbroken_auc, unbroken_secs, absl::ToDoubleSeconds(answered - killed), auc,
              killed_secs, absl::ToDoubleSeconds(recovered_at - killed),
              absl::ToDoubleSeconds(recovered_at - answered));
}

}  // namespace
}  // namespace pstrain::testing
