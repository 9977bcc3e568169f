// Plan(): per-table id dedup.
#include <random>
#include <set>
#include <unordered_map>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

// Every id occurrence maps back to itself, ids are unique, and they appear in
// first-occurrence order.
void ExpectLookupDescribes(const SparseLookup& lookup, const std::vector<uint64_t>& ids) {
  ASSERT_EQ(lookup.index.size(), ids.size());
  std::set<uint64_t> distinct(lookup.unique_ids.begin(), lookup.unique_ids.end());
  EXPECT_EQ(distinct.size(), lookup.unique_ids.size()) << "unique_ids repeat an id";
  std::vector<uint64_t> first_seen;
  std::set<uint64_t> seen;
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_LT(lookup.index[k], lookup.unique_ids.size());
    ASSERT_EQ(lookup.unique_ids[lookup.index[k]], ids[k]) << "occurrence " << k;
    if (seen.insert(ids[k]).second) first_seen.push_back(ids[k]);
  }
  EXPECT_EQ(lookup.unique_ids, first_seen);
}

TEST(Plan, DedupsEachFieldsIdsInFirstSeenOrder) {
  ModelOptions options;
  options.num_sparse = 5;
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(1);
  Batch batch = testing::RandomBatch(300, 13, 5, 4, 40, rng);
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  ASSERT_EQ(plan.lookups.size(), 5u);
  for (int f = 0; f < 5; ++f) ExpectLookupDescribes(plan.lookups[f], batch.ids[f]);
}

TEST(Plan, ReusedPlanForgetsThePreviousBatch) {
  ModelOptions options;
  options.num_sparse = 2;
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(2);
  Batch big = testing::RandomBatch(500, 13, 2, 3, 100000, rng);
  Batch small = testing::RandomBatch(7, 13, 2, 2, 5, rng);
  BatchPlan plan;
  (*model)->Plan(big, &plan);
  (*model)->Plan(small, &plan);
  for (int f = 0; f < 2; ++f) ExpectLookupDescribes(plan.lookups[f], small.ids[f]);
  (*model)->Plan(big, &plan);
  for (int f = 0; f < 2; ++f) ExpectLookupDescribes(plan.lookups[f], big.ids[f]);
}

TEST(Plan, HandlesATenthOfAMillionIds) {
  ModelOptions options;
  options.name = "lr";
  options.num_sparse = 1;
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(3);
  Batch batch = testing::RandomBatch(40000, 13, 1, 4, 150000, rng);
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  ExpectLookupDescribes(plan.lookups[0], batch.ids[0]);
}

TEST(Plan, WideAndDeepTablesOfAFieldShareOneLookup) {
  ModelOptions options = testing::TinyOptions("wide_deep");
  auto model = CreateModel(options);
  ASSERT_TRUE(model.ok());
  const auto& tables = (*model)->tables();
  const auto& sparse = (*model)->sparse_tables();
  ASSERT_EQ(sparse.size(), 6u);
  std::mt19937 rng(4);
  Batch batch = testing::RandomBatch(50, 3, 3, 3, 10, rng);
  BatchPlan plan;
  (*model)->Plan(batch, &plan);
  std::unordered_map<std::string, const SparseLookup*> by_name;
  for (size_t s = 0; s < sparse.size(); ++s) by_name[tables[sparse[s]].name] = &plan.lookups[s];
  for (int f = 0; f < 3; ++f) {
    const std::string field = std::to_string(f + 1);
    const SparseLookup* wide = by_name[std::string("wide.C").append(field)];
    const SparseLookup* emb = by_name[std::string("emb.C").append(field)];
    ASSERT_TRUE(wide != nullptr && emb != nullptr);
    ExpectLookupDescribes(*emb, batch.ids[f]);
    EXPECT_EQ(wide->unique_ids, emb->unique_ids);
    EXPECT_EQ(wide->index, emb->index);
  }
}

}  // namespace
}  // namespace pstrain::worker
