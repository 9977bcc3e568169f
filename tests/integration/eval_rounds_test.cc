// Evaluation rounds never hang, whatever the workers' shards hold: real
// `pstrain local` jobs on 127.0.0.1 whose two workers get different numbers
// of steps (a compressed file goes whole to one worker) or no rows at all,
// with rounds every N steps or at epoch ends, --keep_best, under ASP, BSP
// and SSP, in ps and allreduce mode, and with an elastic worker killed
// mid-run. Each job finishes in seconds, every round covers every eval row
// (the lead scores the share of a worker out of data) and there are as many
// rounds as the longest worker's steps or the epochs give.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/compress_file.h"
#include "data/reader.h"
#include "data/synthetic.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

constexpr int kBatch = 256;
constexpr int64_t kEvalRows = 3000;
constexpr int kEvery = 8;   // --eval_every_steps
constexpr int kEpochs = 2;

// How the training rows lie in files, and so in the two workers' shards.
enum class Layout {
  kLeadShort,  // a plain file, then a gzip file: worker 1 gets far more rows than worker 0 (the lead)
  kLeadLong,   // the gzip file first: worker 0 gets far more rows
  kNoRows,     // one gzip file: worker 0 reads it whole, worker 1 has no rows
};

const char* Name(Layout l) {
  switch (l) {
    case Layout::kLeadShort: return "LeadShort";
    case Layout::kLeadLong: return "LeadLong";
    case Layout::kNoRows: return "NoRows";
  }
  return "?";
}

// Writes `rows` synthetic rows from row `first` to `path`, gzipped when
// `gzip`.
void Write(const std::string& path, int64_t first, int64_t rows, bool gzip) {
  worker::SyntheticOptions o;
  o.seed = 5;
  o.first_row = first;
  o.rows = rows;
  const std::string plain = gzip ? path + ".plain" : path;
  ASSERT_TRUE(worker::WriteSynthetic(o, plain).ok());
  if (gzip) {
    ASSERT_TRUE(worker::CompressFile(plain, path, worker::Compression::kGzip, 1).ok());
    std::filesystem::remove(plain);
  }
}

class EvalRoundsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("pstrain-eval-rounds"));
    const std::string& d = *dir_;
    for (const char* sub : {"/lead-short", "/lead-long", "/no-rows"}) std::filesystem::create_directory(d + sub);
    // Plain rows take about 3x the bytes of gzipped ones: the plain file
    // holds more bytes than the gzip one, so the gzip file's first byte
    // lies in worker 1's half of the byte range (lead-short) or at 0
    // (lead-long: it comes first).
    Write(d + "/lead-short/1.tsv", 0, 10000, false);
    Write(d + "/lead-short/2.tsv.gz", 10000, 14000, true);
    Write(d + "/lead-long/1.tsv.gz", 0, 14000, true);
    Write(d + "/lead-long/2.tsv", 14000, 10000, false);
    Write(d + "/no-rows/all.tsv.gz", 0, 12000, true);
    Write(d + "/eval.tsv", 20000, kEvalRows, false);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::string Data(Layout l) {
    switch (l) {
      case Layout::kLeadShort: return *dir_ + "/lead-short/*";
      case Layout::kLeadLong: return *dir_ + "/lead-long/*";
      case Layout::kNoRows: return *dir_ + "/no-rows/*";
    }
    return "";
  }

  // The eval lines of a metrics file: their eval_rows.
  static std::vector<int64_t> EvalRows(const std::string& path) {
    std::ifstream in(path);
    std::vector<int64_t> rows;
    std::regex re("\"eval_rows\":([0-9]+)");
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (line.find("\"event\":\"eval\"") != std::string::npos && std::regex_search(line, m, re)) {
        rows.push_back(std::stoll(m[1]));
      }
    }
    return rows;
  }

  // The most steps a worker reports having trained.
  static int64_t MostSteps(const std::string& log) {
    std::regex re("trained ([0-9]+) steps");
    int64_t most = -1;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
      most = std::max<int64_t>(most, std::stoll((*it)[1]));
    }
    return most;
  }

  struct Run {
    int code = -1;
    double seconds = 0;
    std::string log, metrics, model;
  };

  static Run Train(const std::string& name, Layout layout, const std::vector<std::string>& extra) {
    Run r;
    r.metrics = absl::StrCat(*dir_, "/", name, ".jsonl");
    r.model = absl::StrCat(*dir_, "/", name, "-model");
    std::vector<std::string> args = {"local", "--servers=1", "--workers=2", "--model=wide_deep",
                                     absl::StrCat("--batch_size=", kBatch),
                                     absl::StrCat("--epochs=", kEpochs), "--train_data=" + Data(layout),
                                     "--eval_data=" + *dir_ + "/eval.tsv", "--metrics_out=" + r.metrics,
                                     "--save_model=" + r.model, "--keep_best", "--log_every_secs=1000",
                                     "--timeout=120"};
    args.insert(args.end(), extra.begin(), extra.end());
    const absl::Time t0 = absl::Now();
    TestProcess p(BinDir() + "/pstrain", args, absl::StrCat(*dir_, "/", name, ".log"));
    r.code = p.Wait(absl::Seconds(90));
    r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    r.log = p.Log();
    return r;
  }

  static std::string* dir_;
};
std::string* EvalRoundsTest::dir_ = nullptr;

TEST_F(EvalRoundsTest, TheLayoutsGiveTheWorkersTheShardsTheTestsNeed) {
  const int64_t s0 = ShardRows(Data(Layout::kLeadShort), 0, 2), s1 = ShardRows(Data(Layout::kLeadShort), 1, 2);
  std::printf("lead-short: worker 0 %lld rows, worker 1 %lld\n", static_cast<long long>(s0),
              static_cast<long long>(s1));
  EXPECT_GT(s1, 3 * s0 / 2) << "lead-short: worker 0 " << s0 << " rows, worker 1 " << s1;
  const int64_t l0 = ShardRows(Data(Layout::kLeadLong), 0, 2), l1 = ShardRows(Data(Layout::kLeadLong), 1, 2);
  std::printf("lead-long: worker 0 %lld rows, worker 1 %lld\n", static_cast<long long>(l0),
              static_cast<long long>(l1));
  EXPECT_GT(l0, 3 * l1 / 2) << "lead-long: worker 0 " << l0 << " rows, worker 1 " << l1;
  EXPECT_EQ(ShardRows(Data(Layout::kNoRows), 1, 2), 0);
}

struct Case {
  Layout layout;
  std::string mode;  // extra flag: --consistency=... or --mode=allreduce
  bool by_epochs;
};

std::string ShortName(const Case& c) {
  std::string mode = c.mode.substr(c.mode.find('=') + 1);
  return absl::StrCat(Name(c.layout), "_", mode, c.by_epochs ? "_EveryEpoch" : "_EverySteps");
}
std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return ShortName(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << ShortName(c); }

class EvalRounds : public EvalRoundsTest, public ::testing::WithParamInterface<Case> {};

// The job ends well in seconds, each round over all eval rows, with every
// round the schedule gives (by the longest worker's steps, or per epoch).
TEST_P(EvalRounds, FinishWithEveryRoundOverEveryEvalRow) {
  const Case& c = GetParam();
  const std::string name = ShortName(c);
  std::vector<std::string> extra = {c.mode};
  extra.push_back(c.by_epochs ? "--eval_every_epochs=1" : absl::StrCat("--eval_every_steps=", kEvery));
  Run r = Train(name, c.layout, extra);
  std::printf("%s: exit %d in %.1f s\n", name.c_str(), r.code, r.seconds);
  ASSERT_EQ(r.code, 0) << r.log;
  EXPECT_LT(r.seconds, 30) << r.log;
  const std::vector<int64_t> rows = EvalRows(r.metrics);
  const int64_t steps = MostSteps(r.log);
  ASSERT_GT(steps, 0) << r.log;
  // Rounds, then the final evaluation.
  const size_t rounds = c.by_epochs ? kEpochs - 1 : static_cast<size_t>(steps / kEvery);
  EXPECT_EQ(rows.size(), rounds + 1) << "longest worker: " << steps << " steps\n" << r.log;
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], kEvalRows) << "evaluation " << i << "\n" << r.log;
  EXPECT_TRUE(std::filesystem::exists(r.model + "/model.json")) << r.log;
  EXPECT_THAT(r.log, ::testing::HasSubstr("--keep_best: " + r.model + " holds the model of round"));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, EvalRounds,
    ::testing::Values(Case{Layout::kLeadShort, "--consistency=asp", false},
                      Case{Layout::kLeadShort, "--consistency=bsp", false},
                      Case{Layout::kLeadShort, "--consistency=ssp", false},
                      Case{Layout::kLeadShort, "--mode=allreduce", false},
                      Case{Layout::kLeadShort, "--consistency=asp", true},
                      Case{Layout::kLeadShort, "--consistency=bsp", true},
                      Case{Layout::kLeadShort, "--consistency=ssp", true},
                      Case{Layout::kLeadShort, "--mode=allreduce", true},
                      Case{Layout::kLeadLong, "--consistency=asp", false},
                      Case{Layout::kLeadLong, "--consistency=bsp", false},
                      Case{Layout::kLeadLong, "--mode=allreduce", true},
                      Case{Layout::kNoRows, "--consistency=asp", false},
                      Case{Layout::kNoRows, "--consistency=bsp", true},
                      Case{Layout::kNoRows, "--mode=allreduce", false}),
    CaseName);

// --early_stop_rounds with unequal shards: the lead's verdict reaches the
// other worker, which stops before its data ends, and the job ends well.
TEST_F(EvalRoundsTest, EarlyStopReachesAWorkerWithMoreStepsThanTheLead) {
  Run r = Train("early-stop", Layout::kLeadShort,
                {"--consistency=bsp", "--eval_every_steps=4", "--early_stop_rounds=1", "--lr=0.3",
                 "--epochs=4"});
  ASSERT_EQ(r.code, 0) << r.log;
  EXPECT_LT(r.seconds, 30) << r.log;
  EXPECT_THAT(r.log, ::testing::HasSubstr("early stop at step"));
  EXPECT_THAT(r.log, ::testing::HasSubstr("\"early_stopped\":true"));
}

// An elastic worker killed mid-run with rounds every few steps: the job goes
// on without it, its shard adopted, and every later round still gathers.
TEST_F(EvalRoundsTest, AWorkerKilledMidRunLeavesNoRoundWaiting) {
  const std::string metrics = *dir_ + "/elastic.jsonl";
  std::vector<std::string> args = {"local", "--servers=1", "--workers=3", "--model=wide_deep",
                                   "--batch_size=64", "--epochs=3", "--consistency=bsp",
                                   "--train_data=" + Data(Layout::kLeadShort),
                                   "--eval_data=" + *dir_ + "/eval.tsv", "--metrics_out=" + metrics,
                                   "--eval_every_steps=20", "--elastic_workers",
                                   "--heartbeat_interval=0.2", "--worker_timeout=2",
                                   "--log_every_secs=1000", "--timeout=120"};
  const absl::Time t0 = absl::Now();
  TestProcess launcher(BinDir() + "/pstrain", args, *dir_ + "/elastic.log");
  absl::Time until = absl::Now() + absl::Seconds(30);
  while (launcher.Log().find("eval at step 20") == std::string::npos && absl::Now() < until &&
         launcher.running()) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::smatch m;
  const std::string log = launcher.Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("worker 2 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)")))
      << log;
  ASSERT_EQ(kill(static_cast<pid_t>(std::stoll(m[1])), SIGKILL), 0);
  ASSERT_EQ(launcher.Wait(absl::Seconds(60)), 0) << launcher.Log();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  std::printf("elastic, worker 2 killed: %.1f s\n", seconds);
  EXPECT_LT(seconds, 30);
  EXPECT_THAT(launcher.Log(), ::testing::HasSubstr("dropped from the job"));
  const std::vector<int64_t> rows = EvalRows(metrics);
  EXPECT_GE(rows.size(), 3u) << launcher.Log();
  EXPECT_EQ(rows.back(), kEvalRows) << launcher.Log();  // the final one: every row, worker 2's by its adopter
}

// An elastic worker killed and restarted at once (re-admitted a step or so
// later), with a round every few steps: a round it was dropped across is
// scored for it by the lead instead of waited for.
TEST_F(EvalRoundsTest, AWorkerRestartedAcrossARoundLeavesNoRoundWaiting) {
  const std::string metrics = *dir_ + "/restarted.jsonl";
  std::vector<std::string> args = {"local", "--servers=1", "--workers=3", "--model=wide_deep",
                                   "--batch_size=64", "--epochs=2", "--consistency=bsp",
                                   "--train_data=" + *dir_ + "/lead-short/1.tsv",
                                   // A larger eval set: a round takes far longer than its
                                   // steps, so the kill lands while worker 2 scores its part.
                                   "--eval_data=" + *dir_ + "/lead-short/1.tsv", "--metrics_out=" + metrics,
                                   "--eval_every_steps=3", "--elastic_workers", "--restart_failed",
                                   "--heartbeat_interval=0.2", "--worker_timeout=20",
                                   "--log_every_secs=1000", "--timeout=120"};
  const absl::Time t0 = absl::Now();
  TestProcess launcher(BinDir() + "/pstrain", args, *dir_ + "/restarted.log");
  absl::Time until = absl::Now() + absl::Seconds(30);
  while (launcher.Log().find("eval at step 9") == std::string::npos && absl::Now() < until &&
         launcher.running()) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::smatch m;
  const std::string log = launcher.Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("worker 2 joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)")))
      << log;
  // A round takes far longer than its 3 steps: the kill most likely lands
  // while worker 2 scores its part of a round (without the lead scoring it
  // when it comes back a step later, that round waited for it for good).
  absl::SleepFor(absl::Milliseconds(30));
  ASSERT_EQ(kill(static_cast<pid_t>(std::stoll(m[1])), SIGKILL), 0);
  ASSERT_EQ(launcher.Wait(absl::Seconds(60)), 0) << launcher.Log();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  std::printf("elastic, worker 2 killed and restarted: %.1f s\n", seconds);
  EXPECT_LT(seconds, 30) << launcher.Log();
  const std::string out = launcher.Log();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("worker 2 re-admitted at step ([0-9]+)"))) << out;
  std::printf("re-admitted at step %s\n", m[1].str().c_str());
  const std::vector<int64_t> rows = EvalRows(metrics);
  ASSERT_GE(rows.size(), 3u) << out;
  for (int64_t r : rows) EXPECT_EQ(r, 10000) << out;
}

}  // namespace
}  // namespace pstrain::testing
