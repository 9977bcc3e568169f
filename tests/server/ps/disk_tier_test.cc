// Sparse tables with a disk tier, with each store (slots, RocksDB): the rows
// past the RAM capacity live on disk and come back when used; the table reads and trains exactly as
// one with every row in RAM, checkpoints and restores (re-sharded) to
// identical rows, refuses a corrupt tier folder by name, and a full disk
// fails the request with a fatal error.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "cluster/sparse_owner.h"
#include "common/status.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"
#include "server/ps/tables/disk_tier.h"

namespace pstrain::server {
namespace {

namespace fs = std::filesystem;

TableSpec Spec(uint32_t dim = 8, OptimizerKind opt = OptimizerKind::kAdagrad) {
  TableSpec s;
  s.id = 0;
  s.name = "emb";
  s.kind = TableKind::kSparse;
  s.dim = dim;
  s.optimizer.kind = opt;
  s.optimizer.lr = 0.1f;
  s.init = {InitKind::kUniform, 0.05f, 7};
  return s;
}

class DiskTierTest : public ::testing::TestWithParam<TierStore> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = c == '/' ? '-' : c;
    dir_ = fs::temp_directory_path() / ("pstrain-tier-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<DiskTier> OpenTier(const std::string& name = "t") {
    auto t = DiskTier::Open((dir_ / name).string(), GetParam());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  }
  static std::unique_ptr<SparseTable> Table(const TableSpec& spec, DiskTier* tier, size_t ram) {
    SparseTable::Options o;
    o.tier = tier;
    o.ram_capacity = ram;
    auto t = SparseTable::Create(spec, o);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  }

  fs::path dir_;
};

// Pushes of random ids (duplicates included) to both tables.
void PushBoth(SparseTable& a, SparseTable& b, std::mt19937_64& rng, uint64_t id_space,
              size_t n) {
  std::vector<uint64_t> ids(n);
  std::vector<float> grads(n * a.dim());
  for (auto& id : ids) id = rng() % id_space;
  for (auto& g : grads) g = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
  ASSERT_TRUE(a.Push(ids, grads.data(), 0.5f).ok());
  absl::Status st = b.Push(ids, grads.data(), 0.5f);
  ASSERT_TRUE(st.ok()) << st;
}

std::vector<float> PullAll(SparseTable& t, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * t.dim());
  absl::Status st = t.Pull(ids, out.data());
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// Ids 0 .. n-1, each pushed once to both tables (250 a push); returns them.
std::vector<uint64_t> PushEachOnce(SparseTable& ram, SparseTable& tiered, uint64_t n,
                                   size_t ram_capacity) {
  std::vector<uint64_t> all;
  for (uint64_t id = 0; id < n; ++id) all.push_back(id);
  for (uint64_t begin = 0; begin < n; begin += 250) {
    std::vector<uint64_t> ids(all.begin() + begin, all.begin() + std::min(n, begin + 250));
    std::vector<float> g(ids.size() * ram.dim(), 0.01f);
    EXPECT_TRUE(ram.Push(ids, g.data(), 1.0f).ok());
    EXPECT_TRUE(tiered.Push(ids, g.data(), 1.0f).ok());
    EXPECT_LE(tiered.ram_rows(), ram_capacity);
  }
  return all;
}

struct Row {
  std::vector<float> values, state;
  uint32_t step;
  bool operator==(const Row&) const = default;
};

std::map<uint64_t, Row> Rows(const SparseTable& t) {
  std::map<uint64_t, Row> rows;
  absl::Status st = t.ForEachRow([&](const SparseRow& r) {
    EXPECT_TRUE(rows.emplace(r.id, Row{{r.values.begin(), r.values.end()},
                                       {r.state.begin(), r.state.end()}, r.step})
                    .second)
        << "row " << r.id << " visited twice";
  });
  EXPECT_TRUE(st.ok()) << st;
  return rows;
}

TEST_P(DiskTierTest, TrainsAndReadsExactlyAsTheTableInRam) {
  for (OptimizerKind opt : {OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    auto tier = OpenTier(opt == OptimizerKind::kAdam ? "adam" : "adagrad");
    const TableSpec spec = Spec(8, opt);
    auto ram = SparseTable::Create(spec);
    ASSERT_TRUE(ram.ok());
    auto tiered = Table(spec, tier.get(), 300);
    std::mt19937_64 rng(5);
    // Every id pushed once, then random pushes and pulls of trained ids.
    std::vector<uint64_t> all = PushEachOnce(**ram, *tiered, 4000, 300);
    for (int round = 0; round < 40; ++round) {
      PushBoth(**ram, *tiered, rng, 4000, 200);
      EXPECT_LE(tiered->ram_rows(), 300u);
      std::vector<uint64_t> probe(100);
      for (auto& id : probe) id = rng() % 4000;
      ASSERT_EQ(PullAll(*tiered, probe), PullAll(**ram, probe)) << "round " << round;
    }
    EXPECT_EQ(tiered->size(), 4000u);
    EXPECT_EQ(PullAll(*tiered, all), PullAll(**ram, all));
    EXPECT_EQ(Rows(*tiered), Rows(**ram));
    const TierCounters& c = tiered->tier_counters();
    EXPECT_GT(c.writes, 3700u);
    EXPECT_GT(c.hits, 1000u);
    EXPECT_GT(c.drops, 0u);  // rows read and left unchanged are not written again
    MemoryStats m = tiered->memory_stats();
    EXPECT_EQ(m.rows, 4000u);
    EXPECT_LE(m.ram_rows, 300u);
    EXPECT_GE(m.disk_rows, 3700u);
  }
}

TEST_P(DiskTierTest, ARowUsedOnceIsReadAndUpdatedOnDiskAndComesIntoRamWhenUsedAgain) {
  auto tier = OpenTier();
  const TableSpec spec = Spec(8);
  auto ram = SparseTable::Create(spec);
  ASSERT_TRUE(ram.ok());
  auto tiered = Table(spec, tier.get(), 300);
  std::vector<uint64_t> all = PushEachOnce(**ram, *tiered, 4000, 300);
  // The first ids left RAM long ago. A step of training on 50 of them: a
  // pull, then a push of their gradients.
  std::vector<uint64_t> cold(all.begin(), all.begin() + 50);
  std::vector<float> g(cold.size() * 8);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.001f * static_cast<float>(i % 17) - 0.008f;
  const TierCounters before = tiered->tier_counters();
  const size_t ram_rows = tiered->ram_rows();
  ASSERT_EQ(PullAll(*tiered, cold), PullAll(**ram, cold));
  ASSERT_TRUE((*ram)->Push(cold, g.data(), 1.0f).ok());
  ASSERT_TRUE(tiered->Push(cold, g.data(), 1.0f).ok());
  const TierCounters& c = tiered->tier_counters();
  if (GetParam() == TierStore::kSlots) {
    // Used once: read, and updated, on disk; RAM holds what it held.
    EXPECT_EQ(c.reads - before.reads, 100u);  // the pull's 50 and the push's
    EXPECT_EQ(c.hits - before.hits, 100u);
    EXPECT_EQ(c.served - before.served, 100u);
    EXPECT_EQ(c.writes - before.writes, 50u);
    EXPECT_EQ(tiered->ram_rows(), ram_rows);
  } else {
    // RocksDB keeps no use counts: into RAM at the pull, the push finds them.
    EXPECT_EQ(c.reads - before.reads, 50u);
    EXPECT_EQ(c.served, 0u);
  }
  EXPECT_EQ(PullAll(*tiered, cold), PullAll(**ram, cold));  // the update is there
  // That pull was their second use: they came into RAM, and read from there.
  const TierCounters second = tiered->tier_counters();
  EXPECT_EQ(PullAll(*tiered, cold), PullAll(**ram, cold));
  EXPECT_EQ(tiered->tier_counters().reads, second.reads);
  EXPECT_LE(tiered->ram_rows(), 300u);
  EXPECT_EQ(Rows(*tiered), Rows(**ram));
}

TEST_P(DiskTierTest, IdsNeverPushedReadZerosAndCreateNothing) {
  auto tier = OpenTier();
  auto t = Table(Spec(), tier.get(), 2000);
  std::vector<uint64_t> ids = {1, 2, 3};
  EXPECT_EQ(PullAll(*t, ids), std::vector<float>(24, 0.0f));
  EXPECT_EQ(t->size(), 0u);
}

TEST_P(DiskTierTest, RestoreOfALargerTableStaysWithinRamAndGivesIdenticalRows) {
  auto layout = ComputeLayout({Spec(16, OptimizerKind::kRowwiseAdagrad)}, 1, 100);
  ASSERT_TRUE(layout.ok());
  TierConfig tier{(dir_ / "server").string(), 0, GetParam()};
  // The smallest budget that keeps kMinRamRows rows.
  tier.memory_budget = DiskTier::kFixedBytes + KvStore::kProcessBytes + 1024 * 128;
  auto a = KvStore::Create(*layout, 0, 0, 1, tier);
  ASSERT_TRUE(a.ok()) << a.status();
  SparseTable& t = *(*a)->sparse(0);
  std::mt19937_64 rng(9);
  for (int k = 0; k < 30; ++k) {
    std::vector<uint64_t> ids(1000);
    for (auto& id : ids) id = rng() % 50000;
    std::vector<float> g(ids.size() * 16, 0.1f);
    ASSERT_TRUE(t.Push(ids, g.data(), 1.0f).ok());
  }
  ASSERT_GT(t.size(), 10 * t.ram_rows());
  const auto before = Rows(t);
  const std::string file = (dir_ / "shard0.bin").string();
  ASSERT_TRUE((*a)->SaveShard(file, 30).ok());
  a->reset();

  // Into two servers, each with its own tier: each gets exactly its ids.
  auto two = ComputeLayout({Spec(16, OptimizerKind::kRowwiseAdagrad)}, 2, 100);
  ASSERT_TRUE(two.ok());
  std::map<uint64_t, Row> after;
  for (int r = 0; r < 2; ++r) {
    auto s = KvStore::Create(*two, r, 0, 1, tier);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::Status st = (*s)->Restore({file});
    ASSERT_TRUE(st.ok()) << st;
    SparseTable& rt = *(*s)->sparse(0);
    EXPECT_LE(rt.ram_rows(), rt.evict_capacity());
    for (auto& [id, row] : Rows(rt)) {
      EXPECT_EQ(SparseOwner(id, 2), r);
      after.emplace(id, row);
    }
  }
  EXPECT_EQ(after, before);
}

TEST_P(DiskTierTest, ABudgetTooSmallForRowsIsRefusedNamingWhatItMustHold) {
  auto layout = ComputeLayout({Spec()}, 1, 100);
  ASSERT_TRUE(layout.ok());
  auto s = KvStore::Create(*layout, 0, 0, 1, TierConfig{dir_.string(), 64 << 20, GetParam()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--server_memory_budget"), std::string::npos);
  EXPECT_NE(s.status().message().find("disk tier"), std::string::npos) << s.status();
}

TEST_P(DiskTierTest, EvictionFlagsWithATierAreRefused) {
  auto tier = OpenTier();
  TableSpec spec = Spec();
  spec.eviction.max_rows = 100;
  SparseTable::Options o;
  o.tier = tier.get();
  o.ram_capacity = 50;
  auto t = SparseTable::Create(spec, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not built"), std::string::npos) << t.status();
}

TEST_P(DiskTierTest, AnEarlierServersRowsAreErasedAndACorruptFolderIsRefusedByName) {
  const fs::path root = dir_ / "tiers";
  {
    auto tier = DiskTier::Open((root / "server0-part0").string(), GetParam());
    ASSERT_TRUE(tier.ok());
    auto t = Table(Spec(), tier->get(), 1024);
    std::vector<uint64_t> ids(3000);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
    std::vector<float> g(ids.size() * 8, 0.1f);
    ASSERT_TRUE(t->Push(ids, g.data(), 1.0f).ok());
  }
  EXPECT_TRUE(DiskTier::CheckFolder(root.string()).ok());
  {
    // Opened again (as when tables are created): empty.
    auto tier = DiskTier::Open((root / "server0-part0").string(), GetParam());
    ASSERT_TRUE(tier.ok());
    int n = 0;
    ASSERT_TRUE((*tier)->ForEach(0, 8 * 2 * 4 + 8, [&](uint64_t, const char*) { ++n; }).ok());
    EXPECT_EQ(n, 0);
  }
  // A RocksDB MANIFEST, or a slot file's header, overwritten with junk:
  // refused, naming the folder.
  {
    auto tier = DiskTier::Open((root / "server0-part0").string(), GetParam());
    ASSERT_TRUE(tier.ok());
    std::vector<float> row(8 * 2 + 2, 0.5f);
    (*tier)->Put(0, 7, row.data(), row.size() * sizeof(float));
    ASSERT_TRUE((*tier)->Commit().ok());
  }
  int damaged = 0;
  for (const auto& e : fs::directory_iterator(root / "server0-part0")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("MANIFEST", 0) == 0 || e.path().extension() == ".slots") {
      std::fstream(e.path(), std::ios::in | std::ios::out | std::ios::binary) << "this is junk";
      ++damaged;
    }
  }
  ASSERT_GT(damaged, 0);
  absl::Status st = DiskTier::CheckFolder(root.string());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find((root / "server0-part0").string()), std::string::npos) << st;
  // Another rank's check looks at its own folders only.
  EXPECT_TRUE(DiskTier::CheckFolder(root.string(), 1).ok());
  EXPECT_FALSE(DiskTier::CheckFolder(root.string(), 0).ok());
}

TEST_P(DiskTierTest, AFullDiskFailsTheRequestWithAFatalErrorNamingTheTier) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  const fs::path mnt = dir_ / "small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=8m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  absl::Status failed;
  {
    auto tier = DiskTier::Open((mnt / "t").string(), GetParam());
    ASSERT_TRUE(tier.ok()) << tier.status();
    auto t = Table(Spec(64), tier->get(), 1024);
    std::vector<uint64_t> ids(4096);
    std::vector<float> g(ids.size() * 64, 0.1f);
    for (uint64_t round = 0; round < 200 && failed.ok(); ++round) {
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = round * ids.size() + i;
      failed = t->Push(ids, g.data(), 1.0f);
    }
  }
  ::umount2(mnt.c_str(), MNT_DETACH);
  ASSERT_FALSE(failed.ok()) << "200 pushes of 4096 new rows of 64 floats fit in 8 MiB?";
  EXPECT_TRUE(IsFatal(failed)) << failed;
  EXPECT_NE(failed.message().find("disk tier"), std::string::npos) << failed;
  EXPECT_NE(failed.message().find((mnt / "t").string()), std::string::npos) << failed;
}

INSTANTIATE_TEST_SUITE_P(Stores, DiskTierTest,
                         ::testing::Values(TierStore::kSlots, TierStore::kRocksDb),
                         [](const ::testing::TestParamInfo<TierStore>& info) {
                           return info.param == TierStore::kSlots ? "slots" : "rocksdb";
                         });

}  // namespace
}  // namespace pstrain::server
