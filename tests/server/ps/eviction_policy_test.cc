// The eviction policies on their own (eviction_policy.h): LRU, LFU and TTL
// over a RowStore whose rows' metadata the test sets, without a table.
// eviction_test.cc holds the table's side (pushes, clocks, restores).
#include "server/ps/tables/eviction_policy.h"

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"
#include "server/ps/tables/row_layout.h"
#include "server/ps/tables/row_store.h"

namespace pstrain::server {
namespace {

TableSpec Spec(uint64_t max_rows, EvictPolicy policy, uint64_t ttl_steps) {
  TableSpec spec;
  spec.id = 5;
  spec.name = "emb.c9";
  spec.kind = TableKind::kSparse;
  spec.dim = 4;
  spec.optimizer.kind = OptimizerKind::kSgd;
  spec.eviction.max_rows = max_rows;
  spec.eviction.policy = policy;
  spec.eviction.ttl_steps = ttl_steps;
  return spec;
}

// A RowStore of rows with metadata, and the ids a policy removed from it.
class Rows {
 public:
  Rows()
      : optimizer_(*optim::Optimizer::Create(Spec(0, EvictPolicy::kLru, 0).optimizer)),
        layout_(Spec(0, EvictPolicy::kLru, 0), *optimizer_, /*meta=*/true),
        store_(layout_) {}

  // Adds row `id`, last used at `clock`, used `count` times.
  void Add(uint64_t id, uint32_t clock, uint32_t count = 1) {
    uint32_t* m = store_.meta(store_.Add(id));
    m[0] = clock;
    m[1] = count;
  }
  void Evict(EvictionPolicy& policy, uint32_t now, size_t budget) {
    policy.Evict(store_, now, budget,
                 [this](size_t slot) { removed_.insert(store_.RemoveAt(slot)); }, &stats_);
  }
  bool Has(uint64_t id) const { return store_.Find(id) != RowStore::kNoRow; }
  const RowStore& store() const { return store_; }
  const std::set<uint64_t>& removed() const { return removed_; }
  const EvictionStats& stats() const { return stats_; }

 private:
  std::unique_ptr<optim::Optimizer> optimizer_;
  RowLayout layout_;
  RowStore store_;
  std::set<uint64_t> removed_;
  EvictionStats stats_;
};

TEST(EvictionPolicy, CreateGivesCapacityThenTtlAndNoneWhenOff) {
  auto none = EvictionPolicy::Create(Spec(0, EvictPolicy::kLru, 0), 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto lru = EvictionPolicy::Create(Spec(10, EvictPolicy::kLru, 0), 10);
  ASSERT_TRUE(lru.ok());
  ASSERT_EQ(lru->size(), 1u);
  EXPECT_NE(dynamic_cast<LruEviction*>((*lru)[0].get()), nullptr);
  auto both = EvictionPolicy::Create(Spec(10, EvictPolicy::kLfu, 7), 10);
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->size(), 2u);
  EXPECT_NE(dynamic_cast<LfuEviction*>((*both)[0].get()), nullptr);
  EXPECT_NE(dynamic_cast<TtlEviction*>((*both)[1].get()), nullptr);
  auto ttl = EvictionPolicy::Create(Spec(0, EvictPolicy::kLfu, 7), 0);
  ASSERT_TRUE(ttl.ok());
  ASSERT_EQ(ttl->size(), 1u);
  EXPECT_NE(dynamic_cast<TtlEviction*>((*ttl)[0].get()), nullptr);
}

TEST(EvictionPolicy, BadConfigsAreRefusedNamingTheTable) {
  auto policy = EvictionPolicy::Create(Spec(10, static_cast<EvictPolicy>(9), 0), 10);
  ASSERT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(policy.status().message().find("sparse table 'emb.c9' (id 5): unknown eviction policy"),
            std::string::npos)
      << policy.status();
  auto ttl = EvictionPolicy::Create(
      Spec(0, EvictPolicy::kLru, EvictionPolicy::kMaxTtlSteps + 1), 0);
  EXPECT_EQ(ttl.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LruEviction, KeepsTheRecentlyUsedRowsWithinCapacity) {
  Rows rows;
  // Row i last used at clock i; the old ones used most.
  for (uint32_t i = 0; i < 1000; ++i) rows.Add(i, i, 1000 - i);
  LruEviction lru(100, /*seed=*/1);
  rows.Evict(lru, /*now=*/1000, /*budget=*/0);
  EXPECT_EQ(rows.store().size(), 100u);
  EXPECT_EQ(rows.removed().size(), 900u);
  EXPECT_EQ(rows.stats().capacity, 900u);
  EXPECT_EQ(rows.stats().ttl, 0u);
  // Sampled LRU is approximate: the newest rows are all there, the oldest
  // none, whatever their counts.
  for (uint64_t id = 980; id < 1000; ++id) EXPECT_TRUE(rows.Has(id)) << id;
  for (uint64_t id = 0; id < 500; ++id) EXPECT_FALSE(rows.Has(id)) << id;
  // At capacity: nothing more goes.
  rows.Evict(lru, 2000, 1000);
  EXPECT_EQ(rows.store().size(), 100u);
}

TEST(LruEviction, PicksTheOldestOfItsSampleAcrossAClockWrap) {
  Rows rows;
  // Clocks just below the wrap are older than those just past it.
  for (uint32_t i = 0; i < 50; ++i) rows.Add(i, UINT32_MAX - 100 + i);
  for (uint32_t i = 50; i < 100; ++i) rows.Add(i, i);
  LruEviction lru(50, /*seed=*/7);
  rows.Evict(lru, /*now=*/200, 0);
  size_t old_kept = 0;
  for (uint64_t id = 0; id < 50; ++id) old_kept += rows.Has(id) ? 1 : 0;
  EXPECT_LT(old_kept, 10u);
}

TEST(LfuEviction, KeepsTheMostUsedRowsAndDropsTheOldestAmongEquals) {
  Rows rows;
  // Rows 0..99 used 50 times, 100..999 once; all at about the same clock.
  for (uint32_t i = 0; i < 1000; ++i) rows.Add(i, 1000 + i % 3, i < 100 ? 50 : 1);
  LfuEviction lfu(200, /*seed=*/1);
  rows.Evict(lfu, /*now=*/1010, 0);
  EXPECT_EQ(rows.store().size(), 200u);
  EXPECT_EQ(rows.stats().capacity, 800u);
  for (uint64_t id = 0; id < 100; ++id) EXPECT_TRUE(rows.Has(id)) << id;
  // Equal counts: age decides.
  Rows equal;
  for (uint32_t i = 0; i < 1000; ++i) equal.Add(i, i, 4);
  LfuEviction by_age(100, /*seed=*/2);
  equal.Evict(by_age, 1000, 0);
  for (uint64_t id = 980; id < 1000; ++id) EXPECT_TRUE(equal.Has(id)) << id;
  for (uint64_t id = 0; id < 500; ++id) EXPECT_FALSE(equal.Has(id)) << id;
}

TEST(LfuEviction, CountsHalveEveryHalfLifeWithoutAnUpdate) {
  constexpr uint32_t kHalf = LfuEviction::kLfuHalfLifeSteps;
  EXPECT_EQ(LfuEviction::DecayedCount(100, 0), 100u);
  EXPECT_EQ(LfuEviction::DecayedCount(100, kHalf - 1), 100u);
  EXPECT_EQ(LfuEviction::DecayedCount(100, kHalf), 50u);
  EXPECT_EQ(LfuEviction::DecayedCount(100, 3 * kHalf), 12u);
  EXPECT_EQ(LfuEviction::DecayedCount(RowMeta::kCountMask, 32 * kHalf), 0u);
  // Rows used 100 times 8 half-lives ago give way to rows used 3 times now.
  Rows rows;
  for (uint32_t i = 0; i < 100; ++i) rows.Add(i, 0, 100);
  for (uint32_t i = 100; i < 200; ++i) rows.Add(i, 8 * kHalf, 3);
  LfuEviction lfu(100, /*seed=*/3);
  rows.Evict(lfu, 8 * kHalf, 0);
  size_t recent_kept = 0;
  for (uint64_t id = 100; id < 200; ++id) recent_kept += rows.Has(id) ? 1 : 0;
  EXPECT_GT(recent_kept, 90u);
}

TEST(TtlEviction, DropsRowsNotUpdatedForTtlSteps) {
  Rows rows;
  for (uint32_t i = 0; i < 100; ++i) rows.Add(i, i);
  TtlEviction ttl(10);
  // A capacity pass (budget 0) sweeps nothing.
  rows.Evict(ttl, /*now=*/100, /*budget=*/0);
  EXPECT_EQ(rows.store().size(), 100u);
  // A sweep over the whole index (a removal counts against the budget like
  // a slot passed): rows older than 10 steps go (now - clock > 10).
  rows.Evict(ttl, 100, rows.store().slots() + rows.store().size());
  for (uint64_t id = 0; id < 90; ++id) EXPECT_FALSE(rows.Has(id)) << id;
  for (uint64_t id = 90; id < 100; ++id) EXPECT_TRUE(rows.Has(id)) << id;
  EXPECT_EQ(rows.stats().ttl, 90u);
  EXPECT_EQ(rows.stats().capacity, 0u);
}

TEST(TtlEviction, SweepsABudgetOfSlotsPerRequestAndGoesOnWhereItStopped) {
  Rows rows;
  for (uint32_t i = 0; i < 200; ++i) rows.Add(i, 0);
  TtlEviction ttl(5);
  const size_t slots = rows.store().slots();
  size_t requests = 0;
  while (rows.store().size() > 0 && requests < 2 * slots) {
    const size_t before = rows.removed().size();
    rows.Evict(ttl, /*now=*/100, /*budget=*/8);
    EXPECT_LE(rows.removed().size() - before, 8u);
    ++requests;
  }
  // Every row expired: one pass over the index removes them all (a
  // removal counts against the budget like a slot passed).
  EXPECT_EQ(rows.store().size(), 0u);
  EXPECT_LE(requests, (slots + 200) / 8 + 2);
  EXPECT_EQ(rows.stats().ttl, 200u);
}

}  // namespace
}  // namespace pstrain::server
