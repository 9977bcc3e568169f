// The admission sketch in checkpoints: kept across save and restore
// (re-sharded too), and a corrupt one refused naming the file.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cluster/sparse_owner.h"
#include "common/checkpoint/shard_file.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {
namespace {

std::vector<TableSpec> Tables() {
  std::vector<TableSpec> t(1);
  t[0].id = 0;
  t[0].name = "emb";
  t[0].kind = TableKind::kSparse;
  t[0].dim = 4;
  t[0].init = {InitKind::kUniform, 0.05f, 2};
  t[0].admission.min_count = 3;
  t[0].admission.sketch_bytes = 8192;
  return t;
}

std::vector<std::unique_ptr<KvStore>> Stores(int servers) {
  auto layout = ComputeLayout(Tables(), servers, /*chunk_floats=*/100);
  EXPECT_TRUE(layout.ok());
  std::vector<std::unique_ptr<KvStore>> out;
  for (int r = 0; r < servers; ++r) {
    auto s = KvStore::Create(*layout, r);
    EXPECT_TRUE(s.ok()) << s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

void Push(std::vector<std::unique_ptr<KvStore>>& stores, uint64_t id) {
  std::vector<float> grad(4, 0.25f);
  int S = static_cast<int>(stores.size());
  ASSERT_TRUE(stores[SparseOwner(id, S)]->sparse(0)->Push({&id, 1}, grad.data(), 1.0f).ok());
}

bool Holds(std::vector<std::unique_ptr<KvStore>>& stores, uint64_t id) {
  return stores[SparseOwner(id, static_cast<int>(stores.size()))]->sparse(0)->Contains(id);
}

class AdmissionCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pstrain-admit-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::string> Save(std::vector<std::unique_ptr<KvStore>>& stores) {
    std::vector<std::string> files;
    for (size_t r = 0; r < stores.size(); ++r) {
      std::string f = (dir_ / ("server-" + std::to_string(r) + ".shard")).string();
      auto saved = stores[r]->SaveShard(f, 3);
      EXPECT_TRUE(saved.ok()) << saved.status();
      files.push_back(f);
    }
    return files;
  }
  std::filesystem::path dir_;
};

TEST_F(AdmissionCheckpointTest, IdPushedTwiceIsAdmittedOnItsFirstPushAfterRestore) {
  for (int after : {2, 3, 1}) {  // the same servers, more, fewer
    auto two = Stores(2);
    for (uint64_t id = 1; id <= 40; ++id) {
      Push(two, id * 7919);
      if (id % 2 == 0) Push(two, id * 7919);  // even ids: twice
    }
    for (uint64_t id = 1; id <= 40; ++id) ASSERT_FALSE(Holds(two, id * 7919));
    std::vector<std::string> files = Save(two);
    auto restored = Stores(after);
    for (auto& st : restored) ASSERT_TRUE(st->Restore(files).ok());
    for (uint64_t id = 1; id <= 40; ++id) Push(restored, id * 7919);
    for (uint64_t id = 2; id <= 40; id += 2) {
      EXPECT_TRUE(Holds(restored, id * 7919)) << id << " onto " << after << " servers";
    }
    // Ids pushed once before are not admitted by one more push (barring a
    // collision in this 8 KiB sketch, which 40 ids do not meet).
    for (uint64_t id = 1; id <= 40; id += 2) {
      EXPECT_FALSE(Holds(restored, id * 7919)) << id << " onto " << after << " servers";
    }
  }
}

TEST_F(AdmissionCheckpointTest, ShardWithoutAdmissionKeepsTheOldFormat) {
  std::vector<TableSpec> tables = Tables();
  tables[0].admission = AdmissionConfig();
  auto layout = ComputeLayout(tables, 1, 100);
  ASSERT_TRUE(layout.ok());
  auto store = KvStore::Create(*layout, 0);
  ASSERT_TRUE(store.ok());
  std::string f = (dir_ / "plain.shard").string();
  ASSERT_TRUE((*store)->SaveShard(f, 1).ok());
  std::ifstream in(f, std::ios::binary);
  char header[12];
  in.read(header, sizeof(header));
  uint32_t version;
  std::memcpy(&version, header + 8, 4);
  EXPECT_EQ(version, 1u);
}

TEST_F(AdmissionCheckpointTest, CorruptSketchIsRefusedNamingTheFile) {
  // A sketch whose width is not a power of two, in a file whose checksum
  // is right: refused by the restore, not only by the checksum.
  std::string f = (dir_ / "bad-sketch.shard").string();
  {
    auto w = ShardFileWriter::Open(f, 0, 1, 2, 3, /*with_sketches=*/true);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->AddSparse(0, 4, 4, 0, [](ShardFileWriter::RowSink) {}).ok());
    std::vector<uint16_t> cells(4 * 100, 1);
    ASSERT_TRUE((*w)->AddSketch(0, 4, cells).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto fresh = Stores(1);
  absl::Status st = fresh[0]->Restore({f});
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(f), std::string::npos) << st;
  EXPECT_NE(st.message().find("admission sketch"), std::string::npos) << st;
}

TEST_F(AdmissionCheckpointTest, FlippedSketchByteIsRefusedNamingTheFile) {
  auto one = Stores(1);
  Push(one, 5);
  std::vector<std::string> files = Save(one);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<long>(f.tellg());
    f.seekp(size - 8 - 100);  // inside the sketch, the last section
    f.put('\x42');
  }
  auto fresh = Stores(1);
  absl::Status st = fresh[0]->Restore(files);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(files[0]), std::string::npos) << st;
}

}  // namespace
}  // namespace pstrain::server
