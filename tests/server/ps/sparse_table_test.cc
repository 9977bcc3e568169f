#include "server/ps/tables/sparse_table.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "common/optim/initializer.h"
#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::server {
namespace {

TableSpec Spec(OptimizerKind kind, uint32_t dim = 4) {
  TableSpec spec;
  spec.id = 3;
  spec.name = "emb.c7";
  spec.kind = TableKind::kSparse;
  spec.dim = dim;
  spec.optimizer.kind = kind;
  spec.optimizer.lr = 0.1f;
  spec.optimizer.initial_accumulator = 0.1f;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.05f;
  spec.init.seed = 42;
  return spec;
}

std::unique_ptr<SparseTable> Make(const TableSpec& spec, SparseTable::Options options = {}) {
  auto table = SparseTable::Create(spec, options);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

std::vector<uint64_t> Ids(std::initializer_list<uint64_t> ids) { return ids; }

std::vector<float> PullRows(SparseTable& table, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * table.dim());
  EXPECT_TRUE(table.Pull(ids, out.data()).ok());
  return out;
}

std::vector<float> InitialRow(const TableSpec& spec, uint64_t id) {
  auto init = optim::Initializer::Create(spec.init, spec.id);
  std::vector<float> row(spec.dim);
  init->FillRow(id, row.data(), spec.dim);
  return row;
}

TEST(SparseTable, PullOfUnseenIdCreatesDeterministicRow) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto a = Make(spec);
  auto b = Make(spec);  // another server holding the same row
  EXPECT_EQ(PullRows(*a, {77}), InitialRow(spec, 77));
  EXPECT_EQ(PullRows(*b, {77}), PullRows(*a, {77}));
  EXPECT_EQ(a->size(), 1u);
  EXPECT_TRUE(a->Contains(77));
  EXPECT_FALSE(a->Contains(78));
}

TEST(SparseTable, WithZeroUntrainedAPullReadsZerosAndThePushCreatesTheRowAtItsInitialValue) {
  TableSpec spec = Spec(OptimizerKind::kSgd);
  spec.zero_untrained = true;
  auto table = Make(spec);
  EXPECT_EQ(PullRows(*table, {77, 78}), std::vector<float>(8, 0.0f));
  EXPECT_EQ(table->size(), 0u) << "a pull created a row";
  std::vector<float> grads = {1, 2, 3, 4};
  ASSERT_TRUE(table->Push(Ids({77}), grads.data(), 1.0f).ok());
  std::vector<float> want = InitialRow(spec, 77);
  for (int c = 0; c < 4; ++c) want[c] -= spec.optimizer.lr * grads[c];
  const std::vector<float> got = PullRows(*table, {77});
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(got[c], want[c]) << c;
  EXPECT_EQ(PullRows(*table, {78}), std::vector<float>(4, 0.0f));
  EXPECT_EQ(table->size(), 1u);
}

TEST(SparseTable, PullReturnsRowsInRequestOrderWithDuplicates) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto table = Make(spec);
  std::vector<float> out = PullRows(*table, {5, 9, 5, 1});
  std::vector<float> want;
  for (uint64_t id : {5, 9, 5, 1}) {
    std::vector<float> row = InitialRow(spec, id);
    want.insert(want.end(), row.begin(), row.end());
  }
  EXPECT_EQ(out, want);
  EXPECT_EQ(table->size(), 3u);
}

TEST(SparseTable, IdsZeroAndAllOnesAreOrdinaryKeys) {
  TableSpec spec = Spec(OptimizerKind::kSgd);
  auto table = Make(spec);
  const std::vector<uint64_t> ids = {0, UINT64_MAX, UINT64_MAX - 1, 1};
  std::vector<float> grads(ids.size() * 4);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i + 1);
  ASSERT_TRUE(table->Push(ids, grads.data(), 1.0f).ok());
  EXPECT_EQ(table->size(), 4u);
  std::vector<float> out = PullRows(*table, ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> init = InitialRow(spec, ids[i]);
    for (size_t c = 0; c < 4; ++c) {
      EXPECT_FLOAT_EQ(out[i * 4 + c], init[c] - 0.1f * grads[i * 4 + c]) << ids[i];
    }
  }
}

TEST(SparseTable, PushAppliesOptimizerWithScaleToEachRow) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto table = Make(spec);
  auto opt = optim::Optimizer::Create(spec.optimizer);
  const std::vector<uint64_t> ids = {10, 20};
  std::vector<float> grads = {1, 2, 3, 4, -1, -2, -3, -4};
  ASSERT_TRUE(table->Push(ids, grads.data(), 0.5f).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> w = InitialRow(spec, ids[i]), state(4);
    (*opt)->InitState(state.data(), 4, 4);
    optim::UpdateArgs args;
    args.weights_in = w.data();
    args.weights_out = w.data();
    args.state = state.data();
    args.state_stride = 4;
    args.grads = grads.data() + 4 * i;
    args.n = 4;
    args.scale = 0.5f;
    (*opt)->Apply(args);
    EXPECT_EQ(PullRows(*table, {ids[i]}), w);
  }
}

TEST(SparseTable, PushMergesDuplicateIdsIntoOneUpdate) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto merged = Make(spec);
  auto summed = Make(spec);
  auto twice = Make(spec);
  std::vector<float> g1 = {1, 2, 3, 4}, g2 = {0.5f, -1, 2, 0}, g3 = {9, 9, 9, 9};
  std::vector<float> request;
  for (auto* g : {&g1, &g3, &g2}) request.insert(request.end(), g->begin(), g->end());
  ASSERT_TRUE(merged->Push(Ids({8, 6, 8}), request.data(), 1.0f).ok());

  std::vector<float> sum = {1.5f, 1, 5, 4};
  ASSERT_TRUE(summed->Push(Ids({8}), sum.data(), 1.0f).ok());
  EXPECT_EQ(PullRows(*merged, {8}), PullRows(*summed, {8}));

  ASSERT_TRUE(twice->Push(Ids({8}), g1.data(), 1.0f).ok());
  ASSERT_TRUE(twice->Push(Ids({8}), g2.data(), 1.0f).ok());
  EXPECT_NE(PullRows(*merged, {8}), PullRows(*twice, {8}));
  EXPECT_EQ(merged->size(), 2u);
}

TEST(SparseTable, NonFiniteGradientIsRejectedAndLeavesTableUnchanged) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto table = Make(spec);
  std::vector<float> before = PullRows(*table, {1, 2});
  std::vector<float> grads = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, NAN, 1};
  absl::Status status = table->Push(Ids({1, 3, 2}), grads.data(), 1.0f);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("emb.c7"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("id 2"), absl::string_view::npos) << status;
  EXPECT_EQ(table->size(), 2u);  // id 3 was not created
  EXPECT_EQ(PullRows(*table, {1, 2}), before);
  EXPECT_TRUE(table->ForEachRow([&](const SparseRow& row) {
    EXPECT_EQ(row.state[0], 0.1f) << row.id;  // accumulators untouched
  }).ok());
}

TEST(SparseTable, NonFiniteScaleOrOverflowingDuplicateSumIsRejected) {
  TableSpec spec = Spec(OptimizerKind::kSgd, 1);
  auto table = Make(spec);
  std::vector<float> one = {1.0f};
  EXPECT_EQ(table->Push(Ids({1}), one.data(), INFINITY).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> big = {3e38f, 3e38f};
  EXPECT_EQ(table->Push(Ids({1, 1}), big.data(), 1.0f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0u);
}

TEST(SparseTable, AdamCountsStepsPerRow) {
  TableSpec spec = Spec(OptimizerKind::kAdam, 2);
  spec.init.kind = InitKind::kZeros;
  spec.optimizer.lr = 0.01f;
  auto table = Make(spec);
  std::vector<float> g = {1.0f, -3.0f};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table->Push(Ids({100}), g.data(), 1.0f).ok());
  ASSERT_TRUE(table->Push(Ids({200}), g.data(), 1.0f).ok());
  // A row's first update is bias-corrected with t = 1: a step of lr per element.
  std::vector<float> fresh = PullRows(*table, {200});
  EXPECT_NEAR(fresh[0], -0.01f, 1e-6);
  EXPECT_NEAR(fresh[1], 0.01f, 1e-6);
  std::map<uint64_t, uint32_t> steps;
  EXPECT_TRUE(table->ForEachRow([&](const SparseRow& row) { steps[row.id] = row.step; }).ok());
  EXPECT_EQ(steps, (std::map<uint64_t, uint32_t>{{100, 3}, {200, 1}}));
}

TEST(SparseTable, RowsCopiedThroughForEachRowAndInsertRowBehaveIdentically) {
  TableSpec spec = Spec(OptimizerKind::kAdam, 3);
  auto source = Make(spec);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 500; ++id) ids.push_back(id * 1000003);
  std::vector<float> grads(ids.size() * 3, 0.25f);
  ASSERT_TRUE(source->Push(ids, grads.data(), 1.0f).ok());
  ASSERT_TRUE(source->Push({ids.data(), 10}, grads.data(), 1.0f).ok());

  auto copy = Make(spec);
  copy->Reserve(source->size());
  EXPECT_TRUE(source->ForEachRow([&](const SparseRow& row) {
    EXPECT_TRUE(copy->InsertRow(row.id, row.values, row.state, row.step).ok());
  }).ok());
  EXPECT_EQ(copy->size(), source->size());
  for (auto* t : {source.get(), copy.get()}) ASSERT_TRUE(t->Push(ids, grads.data(), 0.5f).ok());
  EXPECT_EQ(PullRows(*copy, ids), PullRows(*source, ids));
}

TEST(SparseTable, InsertRowRejectsWrongSizes) {
  auto table = Make(Spec(OptimizerKind::kAdagrad, 4));
  std::vector<float> values(4), state(3);
  EXPECT_EQ(table->InsertRow(1, values, state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0u);
}

TEST(SparseTable, RowwiseAdagradKeepsOneStateFloatPerRow) {
  auto table = Make(Spec(OptimizerKind::kRowwiseAdagrad, 16));
  EXPECT_EQ(table->state_floats(), 1u);
  std::vector<float> g(16, 2.0f);
  ASSERT_TRUE(table->Push(Ids({4}), g.data(), 0.5f).ok());
  EXPECT_TRUE(table
                  ->ForEachRow([](const SparseRow& row) {
                    EXPECT_FLOAT_EQ(row.state[0], 0.1f + 1.0f);
                  })
                  .ok());
}

TEST(SparseTable, ClearRemovesRowsAndLaterPullsStartOver) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto table = Make(spec);
  std::vector<float> g(4, 1.0f);
  ASSERT_TRUE(table->Push(Ids({9}), g.data(), 1.0f).ok());
  EXPECT_TRUE(table->Clear().ok());
  EXPECT_EQ(table->size(), 0u);
  EXPECT_FALSE(table->Contains(9));
  EXPECT_EQ(PullRows(*table, {9}), InitialRow(spec, 9));
}

// A push of the ids a pull fetched uses the rows that pull found (no second
// lookup): the same result as a table that looks every id up, whether pulls
// and pushes interleave, and also when the rows were cleared between the
// pull and its push (the remembered rows then name other ids).
TEST(SparseTable, PushAfterItsPullUpdatesTheRowsOfItsIdsEvenAfterAClear) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  auto pulled = Make(spec);  // pulls before its pushes
  auto looked_up = Make(spec);  // pushes only
  const std::vector<uint64_t> a = {5, 6, 7}, b = {8, 5, 9, 10};
  const std::vector<float> ga(a.size() * 4, 0.5f), gb(b.size() * 4, -0.25f);
  PullRows(*pulled, a);
  PullRows(*pulled, b);  // the next step's pull travels before this push
  ASSERT_TRUE(pulled->Push(a, ga.data(), 1.0f).ok());
  ASSERT_TRUE(pulled->Push(b, gb.data(), 1.0f).ok());
  ASSERT_TRUE(looked_up->Push(a, ga.data(), 1.0f).ok());
  ASSERT_TRUE(looked_up->Push(b, gb.data(), 1.0f).ok());
  for (uint64_t id : {5, 6, 7, 8, 9, 10}) {
    EXPECT_EQ(PullRows(*pulled, {id}), PullRows(*looked_up, {id})) << "id " << id;
  }
  // Pulled, cleared, other ids pulled into the freed rows, then pushed.
  PullRows(*pulled, a);
  ASSERT_TRUE(pulled->Clear().ok());
  const std::vector<uint64_t> c = {11, 12, 13};
  PullRows(*pulled, c);
  ASSERT_TRUE(pulled->Push(a, ga.data(), 1.0f).ok());
  auto fresh = Make(spec);
  ASSERT_TRUE(fresh->Push(a, ga.data(), 1.0f).ok());
  for (uint64_t id : c) EXPECT_EQ(PullRows(*pulled, {id}), InitialRow(spec, id)) << "id " << id;
  for (uint64_t id : a) EXPECT_EQ(PullRows(*pulled, {id}), PullRows(*fresh, {id})) << "id " << id;
}

TEST(SparseTable, RowLimitGivesResourceExhaustedButKeepsServingExistingRows) {
  SparseTable::Options options;
  options.max_rows = 3;
  auto table = Make(Spec(OptimizerKind::kAdagrad), options);
  std::vector<float> out(4 * 4), g(4 * 4, 1.0f);
  ASSERT_TRUE(table->Pull(Ids({1, 2, 3}), out.data()).ok());
  EXPECT_EQ(table->Pull(Ids({1, 4}), out.data()).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table->Push(Ids({2, 5}), g.data(), 1.0f).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(table->Pull(Ids({3, 1, 2}), out.data()).ok());
  EXPECT_EQ(table->size(), 3u);
}

TEST(SparseTable, CreateRejectsDenseSpecZeroDimAndBadOptimizer) {
  TableSpec spec = Spec(OptimizerKind::kAdagrad);
  spec.kind = TableKind::kDense;
  EXPECT_EQ(SparseTable::Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec(OptimizerKind::kAdagrad, 0);
  EXPECT_EQ(SparseTable::Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec(OptimizerKind::kAdagrad);
  spec.optimizer.lr = -1.0f;
  auto bad = SparseTable::Create(spec);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("emb.c7"), absl::string_view::npos);
}

TEST(SparseTable, RowsSurviveIndexGrowth) {
  TableSpec spec = Spec(OptimizerKind::kSgd, 3);
  auto table = Make(spec);
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 200000; ++i) ids.push_back(i * 0x9e3779b97f4a7c15ULL);
  std::vector<float> grads(ids.size() * 3);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 7);
  ASSERT_TRUE(table->Push(ids, grads.data(), 1.0f).ok());
  EXPECT_EQ(table->size(), ids.size());
  std::vector<float> out = PullRows(*table, ids);
  for (size_t i = 0; i < ids.size(); i += 997) {
    std::vector<float> init = InitialRow(spec, ids[i]);
    for (size_t c = 0; c < 3; ++c) {
      ASSERT_FLOAT_EQ(out[i * 3 + c], init[c] - 0.1f * grads[i * 3 + c]) << i;
    }
  }
  EXPECT_EQ(table->size(), ids.size());
}

}  // namespace
}  // namespace pstrain::server
