// `pstrain predict` through the real binary: --out keeps the input's rows
// aligned (one output line per input data line, a bad line an empty
// prediction and its reason), --on_bad_line=fail stops at FILE:LINE, and
// bad input of any kind exits 2.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  return lines;
}

class Predict : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("predict");
    data_ = WriteTrainEval(dir_, 29, 3000, 1000);
    model_ = dir_ + "/model";
    std::string out;
    ASSERT_EQ(RunPstrain({"train", "--train_data=" + data_.train, "--save_model=" + model_,
                          "--batch_size=256"},
                         dir_ + "/train.log", &out, absl::Seconds(120)),
              0);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // `pstrain predict ARGS`: the exit code; the output in *out.
  int Run(std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), "predict");
    TestProcess p(BinDir() + "/pstrain", args, dir_ + "/predict.log");
    const int code = p.Wait(absl::Seconds(60));
    *out = p.Log();
    return code;
  }

  std::string dir_, model_;
  TrainEval data_;
};

TEST_F(Predict, WritesOneLinePerInputLineWithBadLinesMarkedInPlace) {
  // The 1000 eval rows, lines 10, 500 and 1000 spoiled in three ways.
  std::vector<std::string> rows = Lines(ReadFile(data_.eval));
  ASSERT_EQ(rows.size(), 1000u);
  const std::vector<std::string> clean = rows;
  rows[9] = "1\tmany" + rows[9].substr(rows[9].find('\t', 2));
  rows[499] = "0\t1\t2";
  rows[999] = "";
  std::string spoiled;
  for (const std::string& r : rows) spoiled += r + "\n";
  const std::string path = dir_ + "/spoiled.tsv";
  std::ofstream(path) << spoiled;
  std::string out;
  ASSERT_EQ(Run({"--model=" + model_, "--data=" + path, "--out=" + dir_ + "/scores.tsv"}, &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("scored 997 rows"));
  EXPECT_THAT(out, HasSubstr("2 bad lines"));
  EXPECT_THAT(out, HasSubstr("the first: " + path + ":10: column I1: not an integer: \"many\""));
  EXPECT_THAT(out, HasSubstr("1 blank line"));
  const std::vector<std::string> scores = Lines(ReadFile(dir_ + "/scores.tsv"));
  ASSERT_EQ(scores.size(), 1000u) << "one line per input line";
  EXPECT_EQ(scores[9], "\tcolumn I1: not an integer: \"many\"");
  EXPECT_EQ(scores[499], "\t3 fields, the Criteo layout expects 40");
  EXPECT_EQ(scores[999], "\tblank line");

  // Every other line has the score of the same row in the clean file (to
  // the last printed digit or so: a row's matrix products round a little
  // differently where the batches around it hold other rows, depending on
  // the CPU's BLAS kernels; a shifted line would be off by far more).
  std::ofstream(dir_ + "/clean.tsv") << ReadFile(data_.eval);
  ASSERT_EQ(Run({"--model=" + model_, "--data=" + dir_ + "/clean.tsv",
                 "--out=" + dir_ + "/clean-scores.tsv"},
                &out),
            0)
      << out;
  const std::vector<std::string> expected = Lines(ReadFile(dir_ + "/clean-scores.tsv"));
  ASSERT_EQ(expected.size(), 1000u);
  for (size_t i = 0; i < 1000; ++i) {
    if (i == 9 || i == 499 || i == 999) continue;
    double got = 0, want = 0;
    ASSERT_TRUE(absl::SimpleAtod(scores[i], &got)) << "line " << i + 1 << ": " << scores[i];
    ASSERT_TRUE(absl::SimpleAtod(expected[i], &want)) << "line " << i + 1 << ": " << expected[i];
    EXPECT_NEAR(got, want, 1e-5) << "line " << i + 1;
  }
}

TEST_F(Predict, BadInputExitsTwoNamingWhatIsWrong) {
  std::vector<std::string> rows = Lines(ReadFile(data_.eval));
  rows[6] = "1\t2";
  std::string text;
  for (const std::string& r : rows) text += r + "\n";
  const std::string path = dir_ + "/bad.tsv";
  std::ofstream(path) << text;
  std::string csv = ReadFile(data_.eval);
  for (char& c : csv) c = c == '\t' ? ',' : c;
  const std::string comma = dir_ + "/comma.tsv";
  std::ofstream(comma) << csv;
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--data=" + path, "--on_bad_line=fail", "--out=" + dir_ + "/s.tsv"},
       path + ":7: 2 fields, the Criteo layout expects 40; the line: \"1\\t2\""},
      {{"--data=" + dir_ + "/nope.tsv"}, "nope.tsv"},
      {{"--data=" + comma},
       comma + ":1: 1 field, the Criteo layout expects 40; the file seems to be separated by ','"},
      {{"--data=" + path, "--on_bad_line=skip"}, "--on_bad_line=skip: mark or fail"},
      {{"--data=" + path, "--batch_size=0"}, "--batch_size must be >= 1"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("--model=" + model_);
    std::string out;
    EXPECT_EQ(Run(args, &out), 2) << out;
    EXPECT_THAT(out, HasSubstr(c.says));
  }
  std::string out;
  EXPECT_EQ(Run({"--model=" + dir_ + "/no-model", "--data=" + path}, &out), 2) << out;
  EXPECT_THAT(out, HasSubstr("--model=" + dir_ + "/no-model: no such folder"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/s.tsv")) << "a failed run leaves no scores";
}

}  // namespace
}  // namespace pstrain::testing
