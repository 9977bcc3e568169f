// A job run again in its --checkpoint_dir after it finished: reported, not
// "trained" again with nothing to train; trained on when --epochs grew;
// trained from scratch with --new_job, the old job moved aside.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Rerun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("pstrain-rerun");
    data_ = WriteTrainEval(dir_, 3, 20000, 2000);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int Run(const std::vector<std::string>& extra, std::string* out, double* seconds = nullptr) {
    std::vector<std::string> args = {"local", "--servers=1", "--workers=2", "--model=lr",
                                     "--batch_size=256", "--train_data=" + data_.train,
                                     "--eval_data=" + data_.eval, "--checkpoint_dir=" + dir_ + "/job",
                                     "--checkpoint_every_steps=20", "--save_model=" + dir_ + "/model",
                                     "--timeout=60"};
    args.insert(args.end(), extra.begin(), extra.end());
    const absl::Time t0 = absl::Now();
    TestProcess p(BinDir() + "/pstrain", args, dir_ + "/" + std::to_string(runs_++) + ".log");
    const int code = p.Wait(absl::Seconds(90));
    if (seconds != nullptr) *seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    *out = p.Log();
    return code;
  }

  // Samples trained in the run (the workers' "trained N steps, M samples").
  static int64_t Samples(const std::string& log) {
    std::regex re("trained [0-9]+ steps, ([0-9]+) samples");
    int64_t sum = 0;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
      sum += std::stoll((*it)[1]);
    }
    return sum;
  }

  std::string dir_;
  TrainEval data_;
  int runs_ = 0;
};

TEST_F(Rerun, AFinishedJobIsReportedWithoutStartingACluster) {
  std::string out;
  ASSERT_EQ(Run({"--epochs=1"}, &out), 0) << out;
  EXPECT_EQ(Samples(out), 20000) << out;
  double seconds = 0;
  ASSERT_EQ(Run({"--epochs=1"}, &out, &seconds), 0) << out;
  EXPECT_THAT(out, HasSubstr("the job in " + dir_ + "/job finished at step "));
  EXPECT_THAT(out, HasSubstr("after 1 epoch"));
  EXPECT_THAT(out, HasSubstr("eval AUC 0."));
  EXPECT_THAT(out, HasSubstr("its model is in " + dir_ + "/model"));
  EXPECT_THAT(out, HasSubstr("--epochs above 1 trains it on, --new_job trains a new job from scratch"));
  EXPECT_THAT(out, Not(HasSubstr("starting 1 server")));
  EXPECT_THAT(out, Not(HasSubstr("[coordinator]")));
  EXPECT_LT(seconds, 5);
}

TEST_F(Rerun, MoreEpochsTrainTheFinishedJobOnForTheNewEpochsOnly) {
  std::string out;
  ASSERT_EQ(Run({"--epochs=1"}, &out), 0) << out;
  ASSERT_EQ(Run({"--epochs=2"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("--epochs=2 trains it on from its latest checkpoint"));
  EXPECT_EQ(Samples(out), 20000) << "one more epoch, not two\n" << out;
  // The journal now holds a job of 2 epochs.
  ASSERT_EQ(Run({"--epochs=2"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("after 2 epochs"));
  EXPECT_THAT(out, HasSubstr("Nothing to train"));
}

TEST_F(Rerun, NewJobTrainsFromScratchAndKeepsTheOldJobAside) {
  std::string out;
  ASSERT_EQ(Run({"--epochs=1"}, &out), 0) << out;
  ASSERT_EQ(Run({"--epochs=1", "--new_job"}, &out), 0) << out;
  EXPECT_EQ(Samples(out), 20000) << out;
  EXPECT_THAT(out, Not(HasSubstr("resuming from checkpoint"))) << out;
  EXPECT_THAT(out, HasSubstr("the earlier job's journal and checkpoints were moved to " + dir_ + "/job/previous-"));
  int previous = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/job")) {
    if (e.path().filename().string().rfind("previous-", 0) == 0) {
      ++previous;
      EXPECT_TRUE(std::filesystem::exists(e.path() / "coordinator.journal"));
      EXPECT_TRUE(std::filesystem::exists(e.path() / "LATEST"));
    }
  }
  EXPECT_EQ(previous, 1);
}

// A checkpoint's data positions count rows of the input it was taken on:
// restoring it on other input is refused, naming both, before a step; on
// the same files in another folder it trains exactly the rows left.
TEST_F(Rerun, RestoringOnChangedDataIsRefusedAndTheSameFilesMovedTrainWhatWasLeft) {
  std::string out;
  ASSERT_EQ(Run({"--epochs=1"}, &out), 0) << out;
  const std::string ckpt = dir_ + "/job/ckpt-000000020";
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/manifest.json")) << out;
  std::filesystem::create_directories(dir_ + "/moved");
  std::filesystem::create_directories(dir_ + "/grown");
  std::filesystem::copy_file(data_.train, dir_ + "/moved/train.tsv");
  std::filesystem::copy_file(data_.train, dir_ + "/grown/train.tsv");
  {
    std::ofstream more(dir_ + "/grown/train.tsv", std::ios::app);
    std::ifstream eval(data_.eval);
    more << eval.rdbuf();
  }
  auto restore = [&](const std::string& train, const std::string& job) {
    TestProcess p(BinDir() + "/pstrain",
                  {"local", "--v=1", "--servers=1", "--workers=2", "--model=lr", "--batch_size=256",
                   "--train_data=" + train, "--eval_data=" + data_.eval,
                   "--checkpoint_dir=" + dir_ + "/" + job, "--restore=" + ckpt, "--timeout=60"},
                  dir_ + "/" + job + ".log");
    const int code = p.Wait(absl::Seconds(90));
    out = p.Log();
    return code;
  };
  double seconds = 0;
  {
    const absl::Time t0 = absl::Now();
    EXPECT_EQ(restore(dir_ + "/grown/train.tsv", "job-grown"), 2) << out;
    seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  }
  EXPECT_LT(seconds, 10) << "refused only after starting";
  EXPECT_THAT(out, Not(HasSubstr("starting 1 server")));
  EXPECT_THAT(out, HasSubstr("cannot resume its data where the checkpoint of step 20 left it"));
  EXPECT_THAT(out, HasSubstr("after row 5120 of its shard): the training data changed since. The "
                             "checkpoint read 1 file, "));
  EXPECT_THAT(out, HasSubstr("; this run reads 1 file, "));
  EXPECT_EQ(Samples(out), 0) << out;

  ASSERT_EQ(restore(dir_ + "/moved/train.tsv", "job-moved"), 0) << out;
  EXPECT_THAT(out, Not(HasSubstr("cannot resume")));
  EXPECT_EQ(Samples(out), 20000 - 2 * 20 * 256) << out;
  // Each worker starts reading at the line after its last trained one, in
  // the file as this run names it.
  EXPECT_THAT(out, HasSubstr("resuming at step 20 (epoch 0): reading from " + dir_ +
                             "/moved/train.tsv, the line at byte "));
  EXPECT_THAT(out, HasSubstr(", the 5120 rows before it not read again"));
}

}  // namespace
}  // namespace pstrain::testing

namespace pstrain::testing {
namespace {

// What a person sees of a 2-server, 2-worker job by default: who runs,
// the evaluation, the result; not the cluster's own life.
TEST(DefaultOutput, FitsOnAScreenAndHasNoInternals) {
  const std::string dir = MakeTempDir("pstrain-output");
  TrainEval data = WriteTrainEval(dir, 4, 20000, 2000);
  TestProcess p(BinDir() + "/pstrain",
                {"local", "--v=0", "--servers=2", "--workers=2", "--train_data=" + data.train,
                 "--eval_data=" + data.eval, "--epochs=2", "--eval_every_epochs=1", "--timeout=60"},
                dir + "/out.log");
  ASSERT_EQ(p.Wait(absl::Seconds(90)), 0) << p.Log();
  const std::string out = p.Log();
  std::printf("%s", out.c_str());
  EXPECT_THAT(out, HasSubstr("[coordinator] all 2 servers and 2 workers joined"));
  EXPECT_THAT(out, HasSubstr("[worker 0] eval after epoch 1"));
  EXPECT_THAT(out, HasSubstr("[worker 0] RESULT model=dlrm"));
  for (const char* internal : {"joined from", "tables created", "[info]", "shutting down", "serving at",
                               "trained 20", "rows evicted"}) {
    EXPECT_THAT(out, Not(HasSubstr(internal))) << internal;
  }
  EXPECT_LE(std::count(out.begin(), out.end(), '\n'), 15) << out;
  std::filesystem::remove_all(dir);
}

TEST(DefaultOutput, CtrlCStopsTheClusterWithoutCancellationNoise) {
  const std::string dir = MakeTempDir("pstrain-ctrlc");
  TrainEval data = WriteTrainEval(dir, 4, 400000, 2000);
  TestProcess p(BinDir() + "/pstrain",
                {"local", "--v=0", "--servers=2", "--workers=2", "--train_data=" + data.train,
                 "--eval_data=" + data.eval, "--epochs=20", "--timeout=120"},
                dir + "/out.log");
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (p.Log().find("workers joined") == std::string::npos && absl::Now() < until && p.running()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Milliseconds(500));
  p.Signal(SIGINT);
  EXPECT_EQ(p.Wait(absl::Seconds(30)), 130) << p.Log();
  const std::string out = p.Log();
  EXPECT_THAT(out, HasSubstr("[pstrain] Ctrl-C: stopping the cluster"));
  EXPECT_THAT(out, Not(HasSubstr("CANCELLED"))) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
