// pstrain local checks every flag and the data before it starts anything.
#include "launcher/local_options.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "data/compress_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/job_spec.h"
#include "launcher/args.h"
#include "launcher/command.h"

namespace pstrain::launcher {
namespace {

using ::testing::HasSubstr;

// A line of the default schema: label, 13 integers, 26 tokens.
std::string Line(int i, char sep = '\t') {
  std::vector<std::string> cols = {std::to_string(i % 2)};
  for (int d = 0; d < 13; ++d) cols.push_back(std::to_string(i + d));
  for (int c = 0; c < 26; ++c) cols.push_back(absl::StrCat("t", (i * 7 + c) % 11));
  return absl::StrJoin(cols, std::string(1, sep));
}

class LocalOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("pstrain-local-options-", getpid(), "-", ::testing::UnitTest::GetInstance()->random_seed());
    std::filesystem::create_directories(dir_);
    std::string good, csv;
    for (int i = 0; i < 20; ++i) {
      good += Line(i) + "\n";
      csv += Line(i, ',') + "\n";
    }
    Write("train.tsv", good);
    Write("header.tsv", "label\tI1\tI2\n" + good);
    Write("train.csv", csv);
    Write("train.tsv.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8) + "junk\n");
    Write("good.tsv.gz", *worker::CompressBytes(good, worker::Compression::kGzip, -1));
    Write("good.tsv.zst", *worker::CompressBytes(good, worker::Compression::kZstd, 3));
    Write("empty.tsv", "");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // ParseLocalOptions on `args`, expecting a usage error; its message.
  std::string UsageMessage(const std::vector<std::string>& args) {
    absl::StatusOr<LocalOptions> o = ParseLocalOptions(args);
    EXPECT_FALSE(o.ok()) << "accepted: " << absl::StrJoin(args, " ");
    if (o.ok()) return "";
    EXPECT_EQ(ExitCodeOf(o.status()), 2) << o.status();
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << o.status();
    return std::string(o.status().message());
  }

  std::filesystem::path dir_;
};

TEST_F(LocalOptionsTest, NoFlagsAtAllSaysTrainDataIsRequired) {
  EXPECT_THAT(UsageMessage({}), HasSubstr("--train_data (or --train_stream) is required"));
}

TEST_F(LocalOptionsTest, ATypoOfAWorkerFlagSuggestsTheFlag) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--batchsize=64"}),
              HasSubstr("unknown flag --batchsize (did you mean --batch_size?)"));
}

TEST_F(LocalOptionsTest, ATypoOfALocalOrCoordinatorFlagSuggestsIt) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--server=3"}),
              HasSubstr("did you mean --servers?"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--consistensy=bsp"}),
              HasSubstr("did you mean --consistency?"));
}

TEST_F(LocalOptionsTest, ABadValueNamesTheFlagAndTheValue) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--lr=abc"}),
              HasSubstr("--lr=abc"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--model=foo"}),
              HasSubstr("unknown model 'foo'"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--servers=0"}),
              HasSubstr("--servers"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--consistency=fast"}),
              HasSubstr("--consistency=fast: must be asp, bsp or ssp"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--heartbeat_timeout=0.5"}),
              HasSubstr("--heartbeat_timeout must exceed --heartbeat_interval"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--checkpoint_every_steps=10"}),
              HasSubstr("need --checkpoint_dir"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--resume_timeout=-1"}),
              HasSubstr("--resume_timeout must be > 0"));
}

TEST_F(LocalOptionsTest, AMissingDataFileIsNamed) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("nope.tsv")}),
              HasSubstr(absl::StrCat("--train_data: no regular file matches \"", Path("nope.tsv"))));
}

TEST_F(LocalOptionsTest, EmptyTrainingDataIsRefused) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("empty.tsv")}), HasSubstr("--train_data: no data"));
}

TEST_F(LocalOptionsTest, CompressedFilesAreRead) {
  EXPECT_TRUE(ParseLocalOptions({"--train_data=" + Path("good.tsv.gz")}).ok());
  EXPECT_TRUE(ParseLocalOptions({"--train_data=" + Path("good.tsv.zst")}).ok());
}

TEST_F(LocalOptionsTest, ACompressedFileThatCannotBeDecodedIsNamed) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv.gz")}),
              HasSubstr("--train_data: " + Path("train.tsv.gz") + ": corrupt gzip data at "
                        "uncompressed byte 0: "));
}

TEST_F(LocalOptionsTest, AFileInAnotherFormatFailsWithItsFirstBadLine) {
  const std::string m = UsageMessage({"--train_data=" + Path("train.csv")});
  EXPECT_THAT(m, HasSubstr("--train_data: " + Path("train.csv") + ":1: "));
  EXPECT_THAT(m, HasSubstr("(5 of its first 5 lines do not parse)"));
}

TEST_F(LocalOptionsTest, EvalDataInAnotherFormatFailsBeforeTraining) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--eval_data=" + Path("train.csv")}),
              HasSubstr("--eval_data: "));
}

TEST_F(LocalOptionsTest, AHeaderLineIsLeftToTheReaders) {
  EXPECT_TRUE(ParseLocalOptions({"--train_data=" + Path("header.tsv")}).ok());
}

TEST_F(LocalOptionsTest, AGoodInvocationPutsTheJobInTheJobAndRoutesNodeSettings) {
  absl::StatusOr<LocalOptions> o = ParseLocalOptions(
      {"--servers=3", "--train_data=" + Path("train.tsv"), "--consistency=bsp", "--lr=0.1",
       "--log_level=warn", "--metrics_out=" + Path("m.jsonl"), "--elastic_workers",
       "--connect_timeout=5", "--new_job"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->servers, 3);
  EXPECT_TRUE(o->elastic_workers);
  EXPECT_TRUE(o->new_job);
  EXPECT_EQ(o->metrics_out, Path("m.jsonl"));
  // The job's fields reach every process in the job, which says them once.
  absl::StatusOr<job::JobSpec> job = job::JobSpec::Parse(o->job_text, "job");
  ASSERT_TRUE(job.ok()) << job.status() << "\n" << o->job_text;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"train_data", Path("train.tsv")}, {"consistency", "bsp"}, {"lr", "0.1"},
           {"metrics_out", Path("m.jsonl")}, {"elastic_workers", "true"}, {"servers", "3"}}) {
    const job::JobValue* v = job->Find(flag);
    ASSERT_NE(v, nullptr) << flag << " missing from\n" << o->job_text;
    EXPECT_EQ(v->value, value) << flag;
  }
  // A node's own settings go, as given, to the processes that take them.
  EXPECT_THAT(o->coordinator_args, ::testing::ElementsAre("--new_job"));
  EXPECT_THAT(o->common_args, ::testing::ElementsAre("--log_level=warn"));
  EXPECT_THAT(o->worker_args, ::testing::ElementsAre("--connect_timeout=5"));
  // A bare negative boolean is the field's false.
  absl::StatusOr<LocalOptions> negative =
      ParseLocalOptions({"--train_data=" + Path("train.tsv"), "--nooverlap"});
  ASSERT_TRUE(negative.ok()) << negative.status();
  absl::StatusOr<job::JobSpec> negative_job = job::JobSpec::Parse(negative->job_text, "job");
  ASSERT_TRUE(negative_job.ok()) << negative_job.status();
  ASSERT_NE(negative_job->Find("overlap"), nullptr) << negative->job_text;
  EXPECT_EQ(negative_job->Find("overlap")->value, "false");
  // Each check starts from the defaults, whatever an earlier one set.
  absl::StatusOr<LocalOptions> plain = ParseLocalOptions({"--train_data=" + Path("train.tsv")});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->elastic_workers);
  EXPECT_EQ(plain->metrics_out, "");
  EXPECT_THAT(plain->job_text, ::testing::Not(HasSubstr("overlap")));
}

TEST_F(LocalOptionsTest, ANodeSettingLocalGivesEachProcessIsRefused) {
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--rank=1"}),
              HasSubstr("--rank: pstrain local sets it for each process it starts"));
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--connect_timeout=abc"}),
              HasSubstr("--connect_timeout=abc"));
}

TEST_F(LocalOptionsTest, PipelineModeTakesItsWorkerCountFromTheLayout) {
  absl::StatusOr<LocalOptions> o = ParseLocalOptions(
      {"--train_data=" + Path("train.tsv"), "--mode=pipeline", "--stages=2", "--replicas=2",
       "--model=deep_tower"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->workers, 4);
  EXPECT_THAT(UsageMessage({"--train_data=" + Path("train.tsv"), "--mode=pipeline", "--stages=2",
                            "--workers=3"}),
              HasSubstr("--workers=3 but --replicas x --stages x --tensor_parallel = 2"));
}

TEST(DidYouMean, SuggestsOnlyNamesCloseEnoughToBeATypo) {
  const std::vector<std::string> names = {"batch_size", "bucket_mb", "lr", "epochs"};
  EXPECT_EQ(DidYouMean("batchsize", names), " (did you mean --batch_size?)");
  EXPECT_EQ(DidYouMean("epoch", names), " (did you mean --epochs?)");
  EXPECT_EQ(DidYouMean("learning_rate", names), "");
}

TEST(ExitCode, UsageErrorsAreTwoOtherErrorsOneOrTheirOwnCode) {
  EXPECT_EQ(ExitCodeOf(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeOf(UsageError("bad flag")), 2);
  EXPECT_EQ(ExitCodeOf(absl::InternalError("crash")), 1);
  EXPECT_EQ(ExitCodeOf(WithExitCode(absl::AbortedError("signal"), 130)), 130);
  // Context added on the way up keeps the code.
  EXPECT_EQ(ExitCodeOf(Annotate(UsageError("bad"), "--lr")), 2);
}

}  // namespace
}  // namespace pstrain::launcher
