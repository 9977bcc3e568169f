// Feature admission end to end: `pstrain gen --new_id_rate` makes a growing,
// long-tailed id space; `pstrain local --min_count=2` holds fewer rows than
// --min_count=1 on it. Prints both row counts and eval AUCs (issue 18 asks
// for min_count=2 within 0.002 AUC of unbounded at <= 50 % of its rows; the
// test asserts only that admission refuses rows, and reports the rest).
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

class Admission : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("admission"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  int Run(const std::vector<std::string>& args, const std::string& tag, std::string* out,
          absl::Duration timeout = absl::Seconds(300)) {
    return RunPstrain(args, dir_ + "/" + tag + ".log", out, timeout);
  }

  // Rows the servers held at shutdown, from their "table T: N rows" lines.
  static uint64_t RowsAtShutdown(const std::string& log) {
    static const std::regex line("server \\d+: table [^:]+: (\\d+) rows");
    uint64_t rows = 0;
    for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
      rows += std::stoull((*it)[1]);
    }
    return rows;
  }

  std::string dir_;
};

TEST_F(Admission, MinCountTwoHoldsFewerRowsOnDataWithFreshIds) {
  const std::string train = dir_ + "/train.tsv", eval = dir_ + "/eval.tsv";
  std::string out;
  ASSERT_EQ(Run({"gen", "--rows=200000", "--out=" + train, "--seed=9", "--new_id_rate=0.3"},
                "gen-train", &out), 0);
  ASSERT_EQ(Run({"gen", "--rows=50000", "--first_row=200000", "--out=" + eval, "--seed=9",
                 "--new_id_rate=0.3"}, "gen-eval", &out), 0);
  uint64_t rows[3] = {};
  double auc[3] = {};
  for (int min_count : {1, 2}) {
    const std::string tag = absl::StrCat("min_count", min_count);
    const std::string metrics = dir_ + "/" + tag + ".jsonl";
    ASSERT_EQ(Run({"local", "--servers=1", "--workers=1", "--log_every_secs=60",
                   "--train_data=" + train, "--eval_data=" + eval, "--seed=3",
                   "--batch_size=512", "--metrics_out=" + metrics,
                   absl::StrCat("--min_count=", min_count)}, tag, &out), 0);
    rows[min_count] = RowsAtShutdown(out);
    auc[min_count] = LastJsonNumber(metrics, "eval_auc");
  }
  std::printf("min_count=1: %llu rows, eval AUC %.4f\nmin_count=2: %llu rows (%.1f %%), eval "
              "AUC %.4f (%+.4f)\n",
              static_cast<unsigned long long>(rows[1]), auc[1],
              static_cast<unsigned long long>(rows[2]), 100.0 * rows[2] / rows[1], auc[2],
              auc[2] - auc[1]);
  ASSERT_GT(rows[1], 0u);
  EXPECT_LT(rows[2], rows[1]);
  EXPECT_GT(auc[2], 0.6);
}

// Rows of each table at shutdown, summed over the servers, and the rows
// evicted for capacity.
struct TableRows {
  std::map<std::string, uint64_t> rows;
  uint64_t evicted = 0;
};
TableRows RowsByTable(const std::string& log) {
  static const std::regex line(
      "server \\d+: table ([^:]+): (\\d+) rows.* (\\d+) rows evicted for capacity");
  TableRows out;
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    out.rows[(*it)[1]] += std::stoull((*it)[2]);
    out.evicted += std::stoull((*it)[3]);
  }
  return out;
}

TEST_F(Admission, MaxRowsBoundsEveryTableOfARealJob) {
  const std::string train = dir_ + "/train.tsv", eval = dir_ + "/eval.tsv";
  std::string out;
  ASSERT_EQ(Run({"gen", "--rows=60000", "--out=" + train, "--seed=4", "--new_id_rate=0.3"},
                "gen-train", &out), 0);
  ASSERT_EQ(Run({"gen", "--rows=10000", "--first_row=60000", "--out=" + eval, "--seed=4",
                 "--new_id_rate=0.3"}, "gen-eval", &out), 0);
  const uint64_t kMaxRows = 3000;
  const std::string metrics = dir_ + "/bounded.jsonl";
  ASSERT_EQ(Run({"local", "--servers=2", "--workers=1", "--log_every_secs=60",
                 "--train_data=" + train, "--eval_data=" + eval, "--seed=3", "--batch_size=512",
                 "--metrics_out=" + metrics, absl::StrCat("--max_rows=", kMaxRows),
                 "--evict_policy=lfu", "--save_model=" + dir_ + "/model"}, "bounded", &out), 0);
  const TableRows bounded = RowsByTable(out);
  ASSERT_FALSE(bounded.rows.empty()) << out;
  uint64_t largest = 0;
  for (const auto& [table, rows] : bounded.rows) {
    // Each of the 2 servers keeps ceil(max_rows / 2).
    EXPECT_LE(rows, kMaxRows + 1) << table;
    largest = std::max(largest, rows);
  }
  EXPECT_GT(largest, kMaxRows / 2) << "no table reached its bound: the test shows nothing";
  EXPECT_GT(bounded.evicted, 0u);
  const double eval_auc = LastJsonNumber(metrics, "eval_auc");
  EXPECT_GT(eval_auc, 0.55);
  // The saved model reads ids without a row as the servers did (zeros):
  // scoring the eval data again gives the job's eval AUC.
  ASSERT_EQ(Run({"predict", "--model=" + dir_ + "/model", "--data=" + eval}, "predict", &out), 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("AUC ([0-9.]+)"))) << out;
  EXPECT_NEAR(std::stod(m[1]), eval_auc, 1e-3) << out;
}

TEST_F(Admission, BadEvictionFlagsAreUsageErrors) {
  std::string out;
  EXPECT_NE(Run({"local", "--evict_policy=fifo", "--train_data=/nonexistent"}, "bad-policy", &out),
            0);
  EXPECT_NE(out.find("--evict_policy"), std::string::npos) << out;
  EXPECT_NE(Run({"local", "--ttl_steps=-1", "--train_data=/nonexistent"}, "bad-ttl", &out), 0);
  EXPECT_NE(out.find("--ttl_steps"), std::string::npos) << out;
}

TEST_F(Admission, BadAdmissionFlagsAreUsageErrors) {
  std::string out;
  EXPECT_NE(Run({"local", "--min_count=0", "--train_data=/nonexistent"}, "bad-min", &out), 0);
  EXPECT_NE(out.find("--min_count"), std::string::npos) << out;
  EXPECT_NE(Run({"local", "--admit_probability=1.5", "--train_data=/nonexistent"}, "bad-p", &out),
            0);
  EXPECT_NE(out.find("--admit_probability"), std::string::npos) << out;
}

}  // namespace
}  // namespace pstrain::testing
