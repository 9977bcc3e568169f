// Checkpoint shards: save, restore onto another number of servers, refuse
// corrupt files.
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "cluster/sparse_owner.h"
#include "common/checkpoint/shard_file.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {
namespace {

std::vector<TableSpec> Tables() {
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.1f;
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  std::vector<TableSpec> t(3);
  t[0] = {0, "w", TableKind::kDense, 1000, 0, adagrad, {InitKind::kUniform, 0.1f, 1}};
  t[1] = {1, "b", TableKind::kDense, 7, 0, adam, {InitKind::kConstant, 0.5f, 1}};
  t[2] = {2, "emb", TableKind::kSparse, 0, 4, adam, {InitKind::kUniform, 0.05f, 2}};
  return t;
}

// The stores of a job with `servers` servers (one per rank).
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

// Applies a few pushes to every table; the gradients depend only on the
// step and the element (not on how the tables are split).
void Train(std::vector<std::unique_ptr<KvStore>>& stores, int first_step = 0) {
  int S = static_cast<int>(stores.size());
  for (int step = first_step; step < first_step + 3; ++step) {
    std::mt19937 rng(step);
    std::normal_distribution<float> g;
    for (uint32_t t : {0u, 1u}) {
      std::vector<float> grad(Tables()[t].size);
      for (float& v : grad) v = g(rng);
      for (auto& st : stores) {
        DenseShard* d = st->dense(t);
        if (d == nullptr) continue;
        std::span<const float> part(grad.data() + d->offset(), d->length());
        ASSERT_TRUE(d->Push(d->offset(), part, 0.5f).ok());
      }
    }
    for (uint64_t id = 0; id < 200; id += 3) {
      std::vector<uint64_t> ids = {id * 7919};
      std::vector<float> grad(4);
      for (float& v : grad) v = g(rng);
      ASSERT_TRUE(stores[SparseOwner(ids[0], S)]->sparse(2)->Push(ids, grad.data(), 1.0f).ok());
    }
  }
}

// Every dense value and the pushed sparse rows, read through the stores.
std::vector<float> Snapshot(std::vector<std::unique_ptr<KvStore>>& stores) {
  std::vector<float> out;
  int S = static_cast<int>(stores.size());
  for (uint32_t t : {0u, 1u}) {
    uint64_t size = Tables()[t].size;
    std::vector<float> whole(size);
    for (auto& st : stores) {
      DenseShard* d = st->dense(t);
      if (d == nullptr) continue;
      auto w = d->weights();
      std::copy(w.begin(), w.end(), whole.begin() + d->offset());
    }
    out.insert(out.end(), whole.begin(), whole.end());
  }
  for (uint64_t id = 0; id < 200; id += 3) {
    std::vector<uint64_t> ids = {id * 7919};
    std::vector<float> row(4);
    EXPECT_TRUE(stores[SparseOwner(ids[0], S)]->sparse(2)->Pull(ids, row.data()).ok());
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("pstrain-ckpt-" + std::to_string(::getpid()));
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

TEST_F(CheckpointTest, TwoServerCheckpointRestoredOntoThreeServersGivesTheSameParameters) {
  auto two = Stores(2);
  Train(two);
  std::vector<float> before = Snapshot(two);
  std::vector<std::string> files = Save(two);
  auto three = Stores(3);
  for (auto& st : three) ASSERT_TRUE(st->Restore(files).ok());
  EXPECT_EQ(Snapshot(three), before);
  // Optimizer state came along: one more identical step stays identical.
  auto again = Stores(2);
  for (auto& st : again) ASSERT_TRUE(st->Restore(files).ok());
  Train(three, 3);
  Train(again, 3);
  EXPECT_EQ(Snapshot(three), Snapshot(again));
}

TEST_F(CheckpointTest, CorruptShardIsRefusedNamingTheFile) {
  auto two = Stores(2);
  Train(two);
  std::vector<std::string> files = Save(two);
  {
    std::fstream f(files[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x42');
  }
  auto fresh = Stores(2);
  absl::Status st = fresh[0]->Restore(files);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(files[1]), std::string::npos) << st;
}

TEST_F(CheckpointTest, TruncatedShardIsRefused) {
  auto two = Stores(2);
  std::vector<std::string> files = Save(two);
  std::filesystem::resize_file(files[0], std::filesystem::file_size(files[0]) / 2);
  EXPECT_EQ(ShardFile::Read(files[0]).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, SparseRowsAreStreamedFromTheFileNotHeldInMemory) {
  auto one = Stores(1);
  Train(one);
  std::vector<std::string> files = Save(one);
  auto shard = ShardFile::Read(files[0]);
  ASSERT_TRUE(shard.ok()) << shard.status();
  const ShardFile::Section* sparse = nullptr;
  for (const auto& s : (*shard)->sections()) {
    if (s.info.kind == TableKind::kSparse && !s.info.sketch) sparse = &s;
  }
  ASSERT_NE(sparse, nullptr);
  ASSERT_GT(sparse->info.count, 1u);
  uint64_t rows = 0;
  ASSERT_TRUE((*shard)->ForEachRow(*sparse, [&](const ShardFile::SparseRowView&) { ++rows; }).ok());
  EXPECT_EQ(rows, sparse->info.count);
  // The rows come from the open file: cut it short after Read, and the
  // rows past the cut are an error naming it, not stale bytes from memory.
  std::filesystem::resize_file(files[0], sparse->rows_at + 1);
  absl::Status st = (*shard)->ForEachRow(*sparse, [](const ShardFile::SparseRowView&) {});
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find(files[0]), std::string::npos) << st;
}

TEST_F(CheckpointTest, MissingShardFileLeavesDenseRangesUncoveredAndFails) {
  auto two = Stores(2);
  std::vector<std::string> files = Save(two);
  files.pop_back();
  auto fresh = Stores(1);
  EXPECT_EQ(fresh[0]->Restore(files).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace pstrain::server
