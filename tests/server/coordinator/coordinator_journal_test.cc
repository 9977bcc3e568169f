// The coordinator's journal: what is written is read back, a record cut
// short by a crash is ignored, damage is DataLoss naming the file, and the
// end of a job is recorded.
#include "server/coordinator/coordinator_journal.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include <stdlib.h>

namespace pstrain::server {
namespace {

class Journal : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pstrain-journal-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = CoordinatorJournal::PathIn(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static JobJournal Fresh() {
    JobJournal j;
    j.num_servers = 2;
    j.num_workers = 3;
    j.servers.resize(2);
    j.workers.resize(3);
    return j;
  }
  // A journal with a member, an identity, tables, store keys and a checkpoint.
  void WriteSome() {
    auto j = CoordinatorJournal::Create(path_, Fresh());
    ASSERT_TRUE(j.ok()) << j.status();
    JournalMember m;
    m.info.role = proto::Role::kWorker;
    m.info.rank = 2;
    m.info.endpoint = "tcp://w2:1";
    m.info.node_id = "host-b";
    ASSERT_TRUE((*j)->SetMember(proto::Role::kWorker, m).ok());
    ASSERT_TRUE((*j)->SetIdentity("host-b", 2).ok());
    ASSERT_TRUE((*j)->SetEpoch(4).ok());
    proto::TableLayout layout;
    layout.num_servers = 2;
    layout.checkpoint_step = 75;
    std::vector<TableSpec> tables(1);
    tables[0].name = "emb";
    ASSERT_TRUE((*j)->SetTables(tables, &layout).ok());
    ASSERT_TRUE((*j)->SetStore("lead", "0").ok());
    ASSERT_TRUE((*j)->SetStore("nccl", std::string("\0\1\2", 3)).ok());
    ASSERT_TRUE((*j)->SetStore("lead", "1").ok());
    CheckpointJournal c;
    c.checkpoint_step = 100;
    c.last_checkpoint_step = 75;
    ASSERT_TRUE((*j)->SetCheckpoints(c).ok());
  }

  std::string dir_, path_;
};

TEST_F(Journal, NoFileIsNoJournal) {
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_FALSE(j->has_value());
}

TEST_F(Journal, EveryChangeIsReadBack) {
  WriteSome();
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_TRUE(j->has_value());
  const JobJournal& s = **j;
  EXPECT_EQ(s.num_servers, 2);
  EXPECT_EQ(s.num_workers, 3);
  EXPECT_FALSE(s.started.empty());
  EXPECT_EQ(s.epoch, 4u);
  ASSERT_EQ(s.workers.size(), 3u);
  EXPECT_EQ(s.workers[2].info.endpoint, "tcp://w2:1");
  EXPECT_EQ(s.workers[2].info.node_id, "host-b");
  EXPECT_EQ(s.workers[0].info.role, proto::Role::kUnknown);
  ASSERT_EQ(s.identities.size(), 1u);
  EXPECT_EQ(s.identities[0].rank, 2);
  ASSERT_EQ(s.tables.size(), 1u);
  EXPECT_EQ(s.tables[0].name, "emb");
  EXPECT_TRUE(s.has_layout);
  EXPECT_EQ(s.layout.checkpoint_step, 75);
  ASSERT_EQ(s.store.size(), 2u);
  EXPECT_EQ(s.store[0].key, "lead");
  EXPECT_EQ(s.store[0].value, "1");
  EXPECT_EQ(s.store[1].value, std::string("\0\1\2", 3));
  EXPECT_EQ(s.checkpoints.checkpoint_step, 100);
  EXPECT_EQ(s.state, JobState::kRunning);
}

TEST_F(Journal, FinishedJobIsRecordedWithItsStep) {
  {
    auto j = CoordinatorJournal::Create(path_, Fresh());
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE((*j)->End(JobState::kFinished, 1234, "").ok());
  }
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_TRUE(j.ok() && j->has_value()) << j.status();
  EXPECT_EQ((*j)->state, JobState::kFinished);
  EXPECT_EQ((*j)->final_step, 1234);
  EXPECT_FALSE((*j)->ended.empty());
}

TEST_F(Journal, RecordCutShortByACrashIsIgnored) {
  WriteSome();
  auto full = ReadFileToString(path_);
  ASSERT_TRUE(full.ok());
  // The journal plus the first 10 bytes of one more record.
  ASSERT_TRUE(WriteFileAtomically(path_, *full + std::string("\x50\x53\x4a\x31\x40\0\0\0\1\2", 10)).ok());
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)->epoch, 4u);
  EXPECT_EQ((*j)->checkpoints.checkpoint_step, 100);
}

TEST_F(Journal, FlippedByteIsDataLossNamingTheFile) {
  WriteSome();
  auto full = ReadFileToString(path_);
  ASSERT_TRUE(full.ok());
  std::string bad = *full;
  bad[bad.size() - 3] ^= 0x40;  // inside the last record's payload
  ASSERT_TRUE(WriteFileAtomically(path_, bad).ok());
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(j.status().message().find(path_), std::string::npos) << j.status();
  EXPECT_NE(j.status().message().find("checksum mismatch"), std::string::npos) << j.status();
}

TEST_F(Journal, GarbageIsDataLossNamingTheFile) {
  ASSERT_TRUE(WriteFileAtomically(path_, std::string(64, 'x')).ok());
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(j.status().message().find(path_), std::string::npos) << j.status();
}

TEST_F(Journal, EmptyFileIsDataLoss) {
  ASSERT_TRUE(WriteFileAtomically(path_, "").ok());
  auto j = CoordinatorJournal::Load(path_);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace pstrain::server
