// --train_stream end to end: real `pstrain gen --stream` writing partitions
// while `pstrain local` follows them; every partition trained once with its
// progressive metrics; and a server killed with SIGKILL mid-stream, the
// cluster rolled back to its checkpoint (and a worker, with
// --recover_workers): every row of every partition is trained exactly once (the rows per partition equal the rows written, and
// the model ends exactly where the unbroken run's does).
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

struct PartitionLine {
  int64_t rows = -1, rows_scored = -1, workers = -1;
  double auc = NAN;
};

// The last "partition" line of each partition in a metrics file (a
// partition a rollback reaches into is written again: the last counts).
std::map<std::string, PartitionLine> PartitionLines(const std::string& path) {
  std::map<std::string, PartitionLine> out;
  std::ifstream in(path);
  std::string line;
  const std::regex name_re("\"partition\":\"([^\"]+)\"");
  auto number = [&](const std::string& key) {
    std::smatch m;
    double v = NAN;
    if (std::regex_search(line, m, std::regex("\"" + key + "\":([-0-9.eE]+)"))) v = std::stod(m[1]);
    return v;
  };
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find("\"event\":\"partition\"") == std::string::npos ||
        !std::regex_search(line, m, name_re)) {
      continue;
    }
    PartitionLine p;
    p.rows = static_cast<int64_t>(number("rows"));
    p.rows_scored = static_cast<int64_t>(number("rows_scored"));
    p.workers = static_cast<int64_t>(number("workers"));
    p.auc = number("progressive_auc");
    out[m[1].str()] = p;
  }
  return out;
}

std::string PartitionName(int k) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "2026-12-01/%02d", k);
  return buf;
}

TEST(Stream, FollowsPartitionsAsTheyAreWrittenAndTrainsEachOnce) {
  const std::string dir = MakeTempDir("pstrain-stream");
  const std::string stream = dir + "/stream";
  constexpr int kPartitions = 5, kRows = 3000;
  // The writer lands a partition every 0.7 s while the job follows.
  TestProcess writer("pstrain",
                     {"gen", "--stream=" + stream, absl::StrCat("--rows=", kRows),
                      absl::StrCat("--partitions=", kPartitions), "--interval_secs=0.7",
                      "--drift=0.2"},
                     dir + "/gen.log");
  // Before the first partition: the job waits for it (the folder must exist).
  std::filesystem::create_directories(stream);
  std::string log;
  const int code = RunPstrain(
      {"local", "--servers=1", "--workers=2", "--model=lr", "--batch_size=128",
       "--train_stream=" + stream, "--stream_end=" + PartitionName(kPartitions - 1),
       "--stream_poll_secs=0.1", "--metrics_out=" + dir + "/m.jsonl", "--timeout=120",
       "--save_model=" + dir + "/model", "--export_every_secs=0.5"},
      dir + "/local.log", &log, absl::Minutes(3));
  ASSERT_EQ(code, 0) << log;
  EXPECT_EQ(writer.Wait(absl::Seconds(30)), 0) << writer.Log();
  std::map<std::string, PartitionLine> lines = PartitionLines(dir + "/m.jsonl");
  ASSERT_EQ(lines.size(), static_cast<size_t>(kPartitions)) << log;
  int k = 0;
  for (const auto& [name, p] : lines) {
    EXPECT_EQ(name, PartitionName(k++));
    EXPECT_EQ(p.rows, kRows) << name;
    EXPECT_EQ(p.rows_scored, kRows) << name;
    EXPECT_EQ(p.workers, 2) << name;
    // Progressive validation scores each batch before training on it: the
    // first partition meets a model that has seen nothing yet, so its AUC is
    // near 0.5 either side (0.495 seen on a loaded machine); every later one
    // is scored by a model trained on the partitions before it.
    if (name == PartitionName(0)) {
      EXPECT_TRUE(p.auc > 0.4 && p.auc < 1) << name << " " << p.auc;
    } else {
      EXPECT_TRUE(p.auc > 0.5 && p.auc < 1) << name << " " << p.auc;
    }
  }
  // --export_every_secs=0.5 over a job of about 3 s: exports while training,
  // then the final save.
  int saves = 0;
  for (size_t at = log.find("saved to"); at != std::string::npos; at = log.find("saved to", at + 1)) {
    ++saves;
  }
  EXPECT_GE(saves, 3) << log;
  // The export is whole: `pstrain model inspect` verifies it, and names a
  // table file that is damaged.
  std::string inspect;
  ASSERT_EQ(RunPstrain({"model", "inspect", dir + "/model"}, dir + "/inspect.log", &inspect,
                       absl::Seconds(30)),
            0);
  EXPECT_NE(inspect.find("all checksums verified"), std::string::npos) << inspect;
  EXPECT_NE(inspect.find("step "), std::string::npos) << inspect;
  std::string table;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/model")) {
    if (e.path().extension() == ".tbl" && std::filesystem::file_size(e.path()) > 40) {
      table = e.path().string();
      break;
    }
  }
  ASSERT_FALSE(table.empty());
  {
    std::fstream f(table, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(32);
    f.put('\x7f');
  }
  EXPECT_EQ(RunPstrain({"model", "inspect", dir + "/model"}, dir + "/inspect-bad.log", &inspect,
                       absl::Seconds(30)),
            1);
  EXPECT_NE(inspect.find(table), std::string::npos) << inspect;
  // The later partitions were waited for, not found at the start.
  EXPECT_NE(log.find("stream partition " + PartitionName(kPartitions - 1)), std::string::npos);
  EXPECT_NE(log.find("reached: the stream ends"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

TEST(Stream, AStreamWithTrainDataOrInPipelineModeAndBadRecoveryFlagsAreUsageErrors) {
  const std::string dir = MakeTempDir("pstrain-stream-usage");
  std::string log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir, "--train_data=" + dir + "/x.tsv"},
                       dir + "/a.log", &log, absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--train_data and --train_stream"), std::string::npos) << log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir + "/missing"}, dir + "/b.log", &log,
                       absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--train_stream=" + dir + "/missing: not a folder"), std::string::npos) << log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir, "--mode=pipeline", "--stages=2"},
                       dir + "/c.log", &log, absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--train_stream is not built for --mode=pipeline"), std::string::npos) << log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir, "--recover_workers", "--elastic_workers",
                        "--checkpoint_dir=" + dir + "/ckpt"},
                       dir + "/d.log", &log, absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--recover_workers and --elastic_workers"), std::string::npos) << log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir, "--recover_workers"}, dir + "/e.log", &log,
                       absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--recover_workers rolls back to a checkpoint"), std::string::npos) << log;
  EXPECT_NE(RunPstrain({"local", "--train_stream=" + dir, "--export_every_secs=10"}, dir + "/f.log",
                       &log, absl::Seconds(30)),
            0);
  EXPECT_NE(log.find("--export_every_secs needs --export_dir or --save_model"), std::string::npos)
      << log;
  EXPECT_EQ(RunPstrain({"local", "--train_stream=" + dir, "--export_dir=" + dir + "/m/",
                        "--save_model=" + dir + "/m"},
                       dir + "/f2.log", &log, absl::Seconds(30)),
            2);
  EXPECT_NE(log.find("--export_dir and --save_model name the same folder"), std::string::npos)
      << log;
  EXPECT_EQ(RunPstrain({"local", "--train_stream=" + dir, "--export_dir=" + dir + "/exp",
                        "--export_keep_bases=0"},
                       dir + "/f3.log", &log, absl::Seconds(30)),
            2);
  EXPECT_NE(log.find("--export_keep_bases must be >= 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("coordinator at"), std::string::npos) << log;
  // A partition already there that is not data fails before the cluster starts.
  std::filesystem::create_directories(dir + "/bad/p0");
  std::ofstream(dir + "/bad/p0/part-0.tsv") << "not\ta\tclick\tlog\n";
  std::ofstream(dir + "/bad/p0/_SUCCESS");
  EXPECT_EQ(RunPstrain({"local", "--train_stream=" + dir + "/bad"}, dir + "/g.log", &log,
                       absl::Seconds(30)),
            2);
  EXPECT_NE(log.find("--train_stream"), std::string::npos) << log;
  EXPECT_NE(log.find(dir + "/bad/p0/part-0.tsv"), std::string::npos) << log;
  EXPECT_EQ(log.find("coordinator at"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

// Rows per partition and the final model of a stream job, unbroken and with
// `victim` ("server 1" or "worker 0") killed with SIGKILL after the
// checkpoint of step 100 and restarted by the launcher (the cluster rolls
// back to that checkpoint). One worker under BSP makes the training
// deterministic, so a row trained twice or skipped would change the model:
// the eval AUC must match the unbroken run's to the digits printed.
void KillMidStreamAndCheckExactlyOnce(const std::string& victim,
                                      const std::vector<std::string>& extra) {
  const std::string dir = MakeTempDir("pstrain-stream-kill");
  const std::string stream = dir + "/stream";
  constexpr int kPartitions = 10, kRows = 4000;
  std::string log;
  ASSERT_EQ(RunPstrain({"gen", "--stream=" + stream, absl::StrCat("--rows=", kRows),
                        absl::StrCat("--partitions=", kPartitions), "--drift=0.1"},
                       dir + "/gen.log", &log, absl::Minutes(1)),
            0);
  ASSERT_EQ(RunPstrain({"gen", "--out=" + dir + "/eval.tsv", "--rows=5000", "--first_row=900000"},
                       dir + "/gen-eval.log", &log, absl::Minutes(1)),
            0);
  auto args = [&](const std::string& run) {
    std::vector<std::string> a = {
        "local", "--servers=2", "--workers=1", "--model=dlrm", "--consistency=bsp",
        "--batch_size=128", "--train_stream=" + stream,
        "--stream_end=" + PartitionName(kPartitions - 1), "--eval_data=" + dir + "/eval.tsv",
        "--metrics_out=" + dir + "/" + run + ".jsonl", "--checkpoint_dir=" + dir + "/" + run,
        "--checkpoint_every_steps=25", "--heartbeat_interval=0.2", "--heartbeat_timeout=2",
        "--timeout=240"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ASSERT_EQ(RunPstrain(args("unbroken"), dir + "/unbroken.log", &log, absl::Minutes(4)), 0);
  const double unbroken_auc = LastJsonNumber(dir + "/unbroken.jsonl", "eval_auc");

  std::vector<std::string> killed_args = args("killed");
  killed_args.push_back("--restart_failed");
  TestProcess launcher("pstrain", killed_args, dir + "/killed.log");
  absl::Time until = absl::Now() + absl::Seconds(90);
  while (absl::Now() < until && launcher.running() &&
         launcher.Log().find("checkpoint at step 100 written") == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::smatch m;
  const std::string before = launcher.Log();
  ASSERT_TRUE(std::regex_search(
      before, m, std::regex(victim + " joined from [^ ]+ \\(host [^,]+, pid ([0-9]+)\\)")))
      << before;
  pid_t pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(m[1].str(), &pid));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(launcher.Wait(absl::Minutes(4)), 0) << launcher.Log();
  const std::string killed_log = launcher.Log();
  EXPECT_NE(killed_log.find(victim + " exited with code 137; restarting it"), std::string::npos)
      << killed_log;
  EXPECT_NE(killed_log.find("recovered in"), std::string::npos) << killed_log;
  ASSERT_TRUE(std::regex_search(killed_log, m, std::regex("resuming at step ([0-9]+) \\(epoch ([0-9]+)")))
      << killed_log;
  EXPECT_GE(std::stoi(m[1].str()), 100);
  std::printf("%s killed: resumed at step %s, inside partition %s of %d\n", victim.c_str(),
              m[1].str().c_str(), m[2].str().c_str(), kPartitions);

  for (const std::string& run : {std::string("unbroken"), std::string("killed")}) {
    std::map<std::string, PartitionLine> lines = PartitionLines(dir + "/" + run + ".jsonl");
    ASSERT_EQ(lines.size(), static_cast<size_t>(kPartitions)) << run;
    for (const auto& [name, p] : lines) EXPECT_EQ(p.rows, kRows) << run << " " << name;
  }
  // The summary counts the rows trained before the checkpoint it resumed from.
  EXPECT_EQ(LastJsonNumber(dir + "/killed.jsonl", "train_samples"), kPartitions * kRows);
  const double killed_auc = LastJsonNumber(dir + "/killed.jsonl", "eval_auc");
  EXPECT_GT(unbroken_auc, 0.6);
  EXPECT_EQ(killed_auc, unbroken_auc) << killed_log;
  std::printf("eval AUC unbroken %.6f, killed and rolled back %.6f\n", unbroken_auc, killed_auc);
  std::filesystem::remove_all(dir);
}

TEST(Stream, ServerKilledMidStreamRollsBackAndTrainsEveryRowExactlyOnce) {
  KillMidStreamAndCheckExactlyOnce("server 1", {});
}

// --recover_workers: a dead worker rolls the cluster back like a dead
// server, and its replacement resumes from the checkpoint's position.
TEST(Stream, WorkerKilledMidStreamWithRecoverWorkersTrainsEveryRowExactlyOnce) {
  KillMidStreamAndCheckExactlyOnce("worker 0", {"--recover_workers"});
}

}  // namespace
}  // namespace pstrain::testing

namespace pstrain::testing {
namespace {

// A writer restarted on its folder (a container restarted by its policy)
// keeps the partitions it completed, which a trainer may have read, and
// writes the rest: with the same seed, as the unbroken writer would have.
TEST(Stream, ARestartedWriterKeepsItsCompletePartitions) {
  const std::string dir = MakeTempDir("pstrain-stream-rewrite");
  const std::string stream = dir + "/stream", whole = dir + "/whole";
  std::string log;
  ASSERT_EQ(RunPstrain({"gen", "--stream=" + whole, "--rows=300", "--partitions=3"},
                       dir + "/whole.log", &log, absl::Minutes(1)),
            0);
  ASSERT_EQ(RunPstrain({"gen", "--stream=" + stream, "--rows=300", "--partitions=2"},
                       dir + "/first.log", &log, absl::Minutes(1)),
            0);
  const std::string first = stream + "/" + PartitionName(0) + "/part-0.tsv";
  std::filesystem::last_write_time(first, std::filesystem::file_time_type::clock::now() -
                                              std::chrono::hours(1));
  const auto stamp = std::filesystem::last_write_time(first);
  ASSERT_EQ(RunPstrain({"gen", "--stream=" + stream, "--rows=300", "--partitions=3"},
                       dir + "/again.log", &log, absl::Minutes(1)),
            0);
  EXPECT_NE(log.find("partition " + PartitionName(0) + ": already complete, kept"),
            std::string::npos)
      << log;
  EXPECT_EQ(std::filesystem::last_write_time(first), stamp) << "partition 0 was written again";
  for (int k = 0; k < 3; ++k) {
    const std::string part = "/" + PartitionName(k) + "/part-0.tsv";
    EXPECT_FALSE(ReadFile(stream + part).empty()) << part;
    EXPECT_EQ(ReadFile(stream + part), ReadFile(whole + part)) << part;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
