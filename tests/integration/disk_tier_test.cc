// Tables larger than the servers' memory, end to end: `pstrain local
// --server_memory_budget --tier_dir` trains a real job with most sparse
// rows on disk and ends with the AUC of the same job with every row in RAM
// (read the same way: ids never trained read as zeros); a tier folder on a
// full disk stops the server with the tier's error and the job fails
// cleanly; bad tier flags are usage errors.
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

class DiskTier : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("disk-tier"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  int Run(const std::vector<std::string>& args, const std::string& tag, std::string* out,
          absl::Duration timeout = absl::Seconds(300)) {
    return RunPstrain(args, dir_ + "/" + tag + ".log", out, timeout);
  }

  void MakeData() {
    std::string out;
    ASSERT_EQ(Run({"gen", "--rows=60000", "--out=" + train_, "--seed=4", "--new_id_rate=0.3"},
                  "gen-train", &out), 0);
    ASSERT_EQ(Run({"gen", "--rows=10000", "--first_row=60000", "--out=" + eval_, "--seed=4",
                   "--new_id_rate=0.3"}, "gen-eval", &out), 0);
  }
  std::vector<std::string> Job(const std::string& metrics) const {
    return {"local", "--servers=1", "--workers=1", "--log_every_secs=60",
            "--train_data=" + train_, "--eval_data=" + eval_, "--seed=3", "--batch_size=512",
            "--metrics_out=" + metrics};
  }

  std::string dir_;
  std::string train_ = "", eval_ = "";
};

// "disk tier: R rows in RAM and D on disk" lines of the servers, summed.
std::pair<uint64_t, uint64_t> TierRows(const std::string& log) {
  static const std::regex line("disk tier: (\\d+) rows in RAM and (\\d+) on disk");
  uint64_t ram = 0, disk = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    ram += std::stoull((*it)[1]);
    disk += std::stoull((*it)[2]);
  }
  return {ram, disk};
}

TEST_F(DiskTier, AJobWithMostRowsOnDiskEndsWithTheAucOfTheJobInRam) {
  train_ = dir_ + "/train.tsv";
  eval_ = dir_ + "/eval.tsv";
  MakeData();
  std::string out;
  // In RAM, reading never-trained ids as zeros as the tier does (eviction
  // on, with a bound no table reaches).
  std::vector<std::string> ram = Job(dir_ + "/ram.jsonl");
  ram.push_back("--max_rows=100000000");
  ASSERT_EQ(Run(ram, "ram", &out), 0);
  const double ram_auc = LastJsonNumber(dir_ + "/ram.jsonl", "eval_auc");

  std::vector<std::string> tiered = Job(dir_ + "/tiered.jsonl");
  tiered.push_back("--server_memory_budget=128MB");
  tiered.push_back("--tier_dir=" + dir_ + "/tier");
  ASSERT_EQ(Run(tiered, "tiered", &out), 0);
  const double tiered_auc = LastJsonNumber(dir_ + "/tiered.jsonl", "eval_auc");
  const auto [in_ram, on_disk] = TierRows(out);
  std::printf("in RAM: eval AUC %.5f; tiered: %.5f, %llu rows in RAM, %llu on disk\n", ram_auc,
              tiered_auc, static_cast<unsigned long long>(in_ram),
              static_cast<unsigned long long>(on_disk));
  EXPECT_GT(on_disk, 2 * in_ram) << "the budget kept most rows in RAM: the test shows nothing";
  EXPECT_GT(ram_auc, 0.6);
  EXPECT_NEAR(tiered_auc, ram_auc, 1e-4);
}

TEST_F(DiskTier, BadTierFlagsAreUsageErrors) {
  std::string out;
  EXPECT_EQ(Run({"local", "--server_memory_budget=lots", "--tier_dir=/tmp",
                 "--train_data=/nonexistent"}, "bad-budget", &out), 2);
  EXPECT_NE(out.find("--server_memory_budget"), std::string::npos) << out;
  EXPECT_EQ(Run({"local", "--server_memory_budget=1GB", "--train_data=/nonexistent"},
                "no-dir", &out), 2);
  EXPECT_NE(out.find("--tier_dir"), std::string::npos) << out;
  TestProcess server(BinDir() + "/pstrain_server",
                     {"--server_memory_budget=1GB", "--connect_timeout=1"},
                     dir_ + "/server-no-dir.log");
  EXPECT_EQ(server.Wait(absl::Seconds(30)), 2);
  EXPECT_NE(server.Log().find("--tier_dir"), std::string::npos) << server.Log();
  EXPECT_EQ(Run({"local", "--server_memory_budget=1GB", "--tier_dir=/tmp", "--tier_store=lmdb",
                 "--train_data=/nonexistent"}, "bad-store", &out), 2);
  EXPECT_NE(out.find("--tier_store=lmdb: want slots or rocksdb"), std::string::npos) << out;
  TestProcess bad_store(BinDir() + "/pstrain_server",
                        {"--server_memory_budget=1GB", "--tier_dir=" + dir_ + "/t",
                         "--tier_store=lmdb", "--connect_timeout=1"},
                        dir_ + "/server-bad-store.log");
  EXPECT_EQ(bad_store.Wait(absl::Seconds(30)), 2);
  EXPECT_NE(bad_store.Log().find("want slots or rocksdb"), std::string::npos) << bad_store.Log();
}

TEST_F(DiskTier, AFullTierDiskStopsTheServerAndTheJobFailsNamingIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  const std::string mnt = dir_ + "/small";
  std::filesystem::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=6m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  train_ = dir_ + "/train.tsv";
  eval_ = dir_ + "/eval.tsv";
  MakeData();
  std::string out;
  std::vector<std::string> job = Job(dir_ + "/full.jsonl");
  job.push_back("--server_memory_budget=120MB");
  job.push_back("--tier_dir=" + mnt + "/tier");
  const int code = Run(job, "full", &out, absl::Seconds(120));
  ::umount2(mnt.c_str(), MNT_DETACH);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("stopping: "), std::string::npos) << out;
}

}  // namespace
}  // namespace pstrain::testing
