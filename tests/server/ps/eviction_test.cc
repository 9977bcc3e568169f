// Eviction of sparse rows: RowIndex removal, RowArena reuse, and
// SparseTable's max_rows (LRU, LFU) and ttl_steps, in memory and across a
// checkpoint.
#include <cstdint>
#include <filesystem>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "server/ps/tables/row_arena.h"
#include "server/ps/tables/row_index.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

TEST(RowIndexErase, MatchesAMapUnderRandomInsertsAndErases) {
  RowIndex index;
  std::unordered_map<uint64_t, uint32_t> want;
  std::mt19937_64 rng(5);
  // Few distinct ids (many collide in the small array, runs wrap around the
  // end) and both orders of insert and erase.
  for (int i = 0; i < 200000; ++i) {
    const uint64_t id = rng() % 3000;
    if (want.count(id)) {
      ASSERT_EQ(index.Erase(id), want[id]) << "erase " << id << " at " << i;
      want.erase(id);
    } else {
      const uint32_t row = static_cast<uint32_t>(rng() % 1000000);
      index.Insert(id, row);
      want[id] = row;
    }
    if (i % 997 == 0) {
      ASSERT_EQ(index.size(), want.size());
      for (uint64_t probe = 0; probe < 3000; ++probe) {
        auto it = want.find(probe);
        ASSERT_EQ(index.Find(probe), it == want.end() ? RowIndex::kNoRow : it->second)
            << "id " << probe << " after step " << i;
      }
    }
  }
  EXPECT_EQ(index.Erase(1u << 20), RowIndex::kNoRow);
}

TEST(RowIndexErase, EraseSlotKeepsEveryOtherEntryFindable) {
  RowIndex index;
  for (uint64_t id = 0; id < 12; ++id) index.Insert(id * 16, static_cast<uint32_t>(id));
  // Remove entries by slot, in slot order, as a sweep does.
  size_t erased = 0;
  for (size_t pos = 0; pos < index.capacity();) {
    uint64_t id;
    const uint32_t row = index.SlotRow(pos, &id);
    if (row != RowIndex::kNoRow && row % 2 == 0) {
      index.EraseSlot(pos);
      ++erased;
      continue;
    }
    ++pos;
  }
  EXPECT_EQ(erased, 6u);
  for (uint64_t id = 0; id < 12; ++id) {
    EXPECT_EQ(index.Find(id * 16), id % 2 == 0 ? RowIndex::kNoRow : id) << id;
  }
}

TEST(RowArenaRelease, ReleasedRowsAreReusedBeforeTheArenaGrows) {
  RowArena arena(8);
  std::vector<uint32_t> rows;
  for (int i = 0; i < 1000; ++i) rows.push_back(arena.Append());
  const size_t bytes = arena.bytes();
  for (int i = 0; i < 1000; i += 2) arena.Release(rows[i]);
  EXPECT_EQ(arena.size(), 500u);
  std::set<uint32_t> reused;
  for (int i = 0; i < 500; ++i) reused.insert(arena.Append());
  std::set<uint32_t> released;
  for (int i = 0; i < 1000; i += 2) released.insert(rows[i]);
  EXPECT_EQ(reused, released);
  EXPECT_EQ(arena.size(), 1000u);
  // Only the free list's own array came on top.
  EXPECT_LE(arena.bytes(), bytes + 1024 * sizeof(uint32_t));
}

TableSpec Spec(uint64_t max_rows, EvictPolicy policy, uint64_t ttl_steps) {
  TableSpec spec;
  spec.id = 2;
  spec.name = "emb.c3";
  spec.kind = TableKind::kSparse;
  spec.dim = 4;
  spec.optimizer.kind = OptimizerKind::kAdagrad;
  spec.optimizer.lr = 0.1f;
  spec.optimizer.initial_accumulator = 0.1f;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.05f;
  spec.init.seed = 7;
  spec.eviction.max_rows = max_rows;
  spec.eviction.policy = policy;
  spec.eviction.ttl_steps = ttl_steps;
  return spec;
}

std::unique_ptr<SparseTable> Make(const TableSpec& spec) {
  auto table = SparseTable::Create(spec);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

void PushIds(SparseTable& t, const std::vector<uint64_t>& ids, int64_t step, float g = 0.5f) {
  std::vector<float> grads(ids.size() * t.dim(), g);
  ASSERT_TRUE(t.Push(ids, grads.data(), 1.0f, 1.0f, step).ok());
}

std::vector<float> PullRow(SparseTable& t, uint64_t id) {
  std::vector<float> out(t.dim());
  EXPECT_TRUE(t.Pull({&id, 1}, out.data()).ok());
  return out;
}

size_t RowsSeen(const SparseTable& t) {
  size_t n = 0;
  EXPECT_TRUE(t.ForEachRow([&](const SparseRow&) { ++n; }).ok());
  return n;
}

TEST(Eviction, LruKeepsTheRecentRowsWithinMaxRows) {
  auto t = Make(Spec(100, EvictPolicy::kLru, 0));
  for (int64_t step = 0; step < 1000; ++step) PushIds(*t, {static_cast<uint64_t>(step)}, step);
  EXPECT_EQ(t->size(), 100u);
  EXPECT_EQ(RowsSeen(*t), 100u);  // what a checkpoint writes: the live rows
  EXPECT_EQ(t->eviction_stats().capacity, 900u);
  EXPECT_EQ(t->eviction_stats().ttl, 0u);
  // Sampled LRU is approximate: the newest rows are all there, the oldest
  // none.
  for (uint64_t id = 980; id < 1000; ++id) EXPECT_TRUE(t->Contains(id)) << id;
  for (uint64_t id = 0; id < 500; ++id) EXPECT_FALSE(t->Contains(id)) << id;
  // Memory stays that of the rows kept (the index and arena do not grow
  // with the ids that went through).
  EXPECT_LT(t->memory_stats().total_bytes, 64u << 10);
}

TEST(Eviction, LfuKeepsTheHotRowsWhileAStreamOfNewIdsGoesThrough) {
  for (EvictPolicy policy : {EvictPolicy::kLfu, EvictPolicy::kLru}) {
    auto t = Make(Spec(200, policy, 0));
    std::vector<uint64_t> hot;
    for (uint64_t id = 0; id < 50; ++id) hot.push_back(1000000 + id);
    // Hot ids every 4th step, a stream of fresh ids every step.
    uint64_t fresh = 0;
    for (int64_t step = 0; step < 4000; ++step) {
      std::vector<uint64_t> ids;
      for (int k = 0; k < 20; ++k) ids.push_back(fresh++);
      if (step % 4 == 0) ids.insert(ids.end(), hot.begin(), hot.end());
      PushIds(*t, ids, step);
    }
    EXPECT_LE(t->size(), 200u);
    size_t kept = 0;
    for (uint64_t id : hot) kept += t->Contains(id) ? 1 : 0;
    if (policy == EvictPolicy::kLfu) {
      EXPECT_EQ(kept, hot.size()) << "LFU lost hot rows";
    } else {
      // 80 fresh rows arrive between two pushes of a hot row and the table
      // keeps 200: LRU keeps them too, but it is the recency that saves them.
      EXPECT_GT(kept, hot.size() * 9 / 10) << "LRU";
    }
  }
}

TEST(Eviction, RowsThatSurviveAreExactlyThoseOfAnUnboundedTable) {
  // The churn around them (rows removed, their memory reused) must not
  // touch the rows kept.
  auto bounded = Make(Spec(64, EvictPolicy::kLfu, 0));
  auto unbounded = Make(Spec(0, EvictPolicy::kLru, 0));
  std::mt19937_64 rng(3);
  uint64_t fresh = 1 << 20;
  for (int64_t step = 0; step < 3000; ++step) {
    std::vector<uint64_t> ids;
    // Every hot id every step (so LFU never picks one), a few twice.
    for (uint64_t h = 0; h < 16; ++h) ids.push_back(h);
    for (int k = 0; k < 4; ++k) ids.push_back(rng() % 16);
    for (int k = 0; k < 12; ++k) ids.push_back(fresh++);
    std::vector<float> out(ids.size() * 4);
    ASSERT_TRUE(bounded->Pull(ids, out.data()).ok());
    ASSERT_TRUE(unbounded->Pull(ids, out.data()).ok());
    const float g = static_cast<float>(step % 7) * 0.1f - 0.3f;
    PushIds(*bounded, ids, step, g);
    PushIds(*unbounded, ids, step, g);
  }
  EXPECT_LE(bounded->size(), 64u);
  for (uint64_t id = 0; id < 16; ++id) {
    ASSERT_TRUE(bounded->Contains(id)) << id;
    EXPECT_EQ(PullRow(*bounded, id), PullRow(*unbounded, id)) << id;
  }
}

TEST(Eviction, AnEvictedRowReadsAsMissingAgain) {
  auto t = Make(Spec(0, EvictPolicy::kLru, 10));
  const std::vector<float> initial = PullRow(*t, 42);
  EXPECT_EQ(initial, std::vector<float>(4, 0.0f));
  PushIds(*t, {42}, 0);
  ASSERT_NE(PullRow(*t, 42), initial);
  for (int64_t step = 1; step < 200; ++step) PushIds(*t, {static_cast<uint64_t>(step)}, step);
  EXPECT_FALSE(t->Contains(42));
  EXPECT_EQ(PullRow(*t, 42), initial);
}

TEST(Eviction, TtlDropsRowsNotUpdatedForTtlSteps) {
  auto t = Make(Spec(0, EvictPolicy::kLru, 50));
  PushIds(*t, {7, 8}, 0);
  for (int64_t step = 1; step <= 400; ++step) {
    std::vector<uint64_t> ids = {1000 + static_cast<uint64_t>(step)};
    if (step % 40 == 0) ids.push_back(8);  // 8 is updated often enough
    PushIds(*t, ids, step);
  }
  EXPECT_FALSE(t->Contains(7));
  EXPECT_TRUE(t->Contains(8));
  // The newest 50 steps' rows are there; a row is gone within about two
  // ttls of its last update (the sweep is incremental).
  for (uint64_t step = 351; step <= 400; ++step) EXPECT_TRUE(t->Contains(1000 + step)) << step;
  for (uint64_t step = 1; step <= 300; ++step) EXPECT_FALSE(t->Contains(1000 + step)) << step;
  EXPECT_GT(t->eviction_stats().ttl, 250u);
  EXPECT_EQ(t->eviction_stats().capacity, 0u);
}

TEST(Eviction, WithoutAStepTheClockTicksOncePerPush) {
  auto t = Make(Spec(0, EvictPolicy::kLru, 5));
  PushIds(*t, {1}, -1);
  for (int i = 0; i < 40; ++i) PushIds(*t, {100 + static_cast<uint64_t>(i)}, -1);
  EXPECT_FALSE(t->Contains(1));
  EXPECT_EQ(t->clock(), 41u);
}

TEST(Eviction, PullsCreateNoRowsAndMissingRowsReadAsZeros) {
  auto t = Make(Spec(32, EvictPolicy::kLru, 0));
  std::vector<uint64_t> ids(100);
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::vector<float> out(ids.size() * 4, 1.0f);
  ASSERT_TRUE(t->Pull(ids, out.data()).ok());
  EXPECT_EQ(t->size(), 0u);
  EXPECT_EQ(out, std::vector<float>(ids.size() * 4, 0.0f));
  // A push creates the row with the initializer's value, then updates it.
  auto plain = Make(Spec(0, EvictPolicy::kLru, 0));
  PushIds(*t, {7}, 0);
  PushIds(*plain, {7}, 0);
  EXPECT_EQ(PullRow(*t, 7), PullRow(*plain, 7));
}

TEST(Eviction, LfuHalvesTheCountsOfRowsNoLongerUsed) {
  // Rows pushed 100 times long ago give way to new ones pushed a few times
  // lately, once enough half-lives have gone by.
  auto t = Make(Spec(10, EvictPolicy::kLfu, 0));
  std::vector<uint64_t> old_hot;
  for (uint64_t id = 0; id < 10; ++id) old_hot.push_back(id);
  for (int64_t step = 0; step < 100; ++step) PushIds(*t, old_hot, step);
  int64_t step = 100 + 8 * 1024;  // 8 half-lives: 100 pushes count as 0
  for (int k = 0; k < 3; ++k) PushIds(*t, {500, 501, 502}, step++);
  EXPECT_TRUE(t->Contains(500) && t->Contains(501) && t->Contains(502));
  EXPECT_EQ(t->size(), 10u);
}

TEST(Eviction, BadConfigsAreRefused) {
  TableSpec ttl = Spec(0, EvictPolicy::kLru, SparseTable::kMaxTtlSteps + 1);
  EXPECT_FALSE(SparseTable::Create(ttl).ok());
  TableSpec policy = Spec(10, static_cast<EvictPolicy>(9), 0);
  auto st = SparseTable::Create(policy);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("eviction policy"), std::string::npos) << st.status();
}

TEST(Eviction, RestoredRowsAreKeptAsUpdatedAtTheCheckpointStepAndCutToCapacity) {
  auto t = Make(Spec(0, EvictPolicy::kLru, 100));
  std::vector<std::pair<uint64_t, std::vector<float>>> saved;
  for (uint64_t id = 0; id < 300; ++id) PushIds(*t, {id}, 5000);
  EXPECT_TRUE(t->ForEachRow([&](const SparseRow& r) {
    saved.emplace_back(r.id, std::vector<float>(r.values.begin(), r.values.end()));
  }).ok());
  ASSERT_EQ(saved.size(), 300u);
  // Restored at step 5000 into a table that keeps 120 rows: the clock
  // starts there (no row expires at the next push) and 120 are kept.
  SparseTable::Options options;
  options.evict_capacity = 120;
  auto r = SparseTable::Create(Spec(1000, EvictPolicy::kLru, 100), options);
  ASSERT_TRUE(r.ok());
  (*r)->AdvanceClock(5000);
  const std::vector<float> state(t->state_floats(), 0.1f);
  for (const auto& [id, values] : saved) ASSERT_TRUE((*r)->InsertRow(id, values, state).ok());
  EXPECT_TRUE((*r)->EvictToCapacity().ok());
  EXPECT_EQ((*r)->size(), 120u);
  PushIds(**r, {99999}, 5001);
  EXPECT_EQ((*r)->size(), 120u);
  EXPECT_EQ((*r)->eviction_stats().ttl, 0u);
  for (const auto& [id, values] : saved) {
    if ((*r)->Contains(id)) {
      EXPECT_EQ(PullRow(**r, id), values) << id;
    }
  }
}

}  // namespace
}  // namespace pstrain::server
