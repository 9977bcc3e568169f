// Feature admission of sparse tables: the count-min sketch, min_count and
// admit_probability.
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "server/ps/tables/count_min_sketch.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

TableSpec Spec(uint32_t min_count, float admit_probability = 1.0f) {
  TableSpec spec;
  spec.id = 3;
  spec.name = "emb.c7";
  spec.kind = TableKind::kSparse;
  spec.dim = 4;
  spec.optimizer.kind = OptimizerKind::kAdagrad;
  spec.optimizer.lr = 0.1f;
  spec.optimizer.initial_accumulator = 0.1f;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.05f;
  spec.init.seed = 42;
  spec.admission.min_count = min_count;
  spec.admission.admit_probability = admit_probability;
  spec.admission.sketch_bytes = 4096;
  return spec;
}

std::unique_ptr<SparseTable> Make(const TableSpec& spec) {
  auto table = SparseTable::Create(spec);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

std::vector<float> PullRow(SparseTable& t, uint64_t id) {
  std::vector<float> out(t.dim());
  EXPECT_TRUE(t.Pull({&id, 1}, out.data()).ok());
  return out;
}

void PushOne(SparseTable& t, uint64_t id, float g) {
  std::vector<float> grad(t.dim(), g);
  ASSERT_TRUE(t.Push({&id, 1}, grad.data(), 1.0f).ok());
}

TEST(CountMinSketch, NeverUndercountsAndItsMemoryIsFixed) {
  CountMinSketch sketch(CountMinSketch::WidthForBudget(4096));
  EXPECT_EQ(sketch.width(), 512u);
  EXPECT_EQ(sketch.bytes(), 4096u);
  std::map<uint64_t, uint32_t> exact;
  std::mt19937_64 rng(7);
  // Far more distinct ids than counters: collisions everywhere.
  for (int i = 0; i < 50000; ++i) {
    uint64_t id = rng() % 20000;
    ++exact[id];
    sketch.Add(id);
  }
  EXPECT_EQ(sketch.bytes(), 4096u);
  for (const auto& [id, n] : exact) ASSERT_GE(sketch.Count(id), n) << id;
}

TEST(CountMinSketch, ConservativeUpdateIsExactWithoutCollisions) {
  CountMinSketch sketch(1 << 16);
  for (int k = 1; k <= 5; ++k) EXPECT_EQ(sketch.Add(99), k);
  EXPECT_EQ(sketch.Add(7, 3), 3);
  EXPECT_EQ(sketch.Count(99), 5);
  EXPECT_EQ(sketch.Count(12345), 0);
}

TEST(CountMinSketch, CountsSaturate) {
  CountMinSketch sketch(64);
  sketch.Add(1, 70000);
  EXPECT_EQ(sketch.Count(1), CountMinSketch::kMaxCount);
  EXPECT_EQ(sketch.Add(1), CountMinSketch::kMaxCount);
}

TEST(CountMinSketch, MergeOfAnotherWidthNeverUndercounts) {
  CountMinSketch a(256), b(1024);
  std::map<uint64_t, uint32_t> in_a, in_b;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    uint64_t id = rng() % 5000;
    if (id % 2) {
      a.Add(id), ++in_a[id];
    } else {
      b.Add(id), ++in_b[id];
    }
  }
  CountMinSketch narrow(128), wide(4096);
  for (CountMinSketch* s : {&narrow, &wide}) {
    s->MergeFrom(a);
    s->MergeFrom(b);
    for (const auto& [id, n] : in_a) ASSERT_GE(s->Count(id), n);
    for (const auto& [id, n] : in_b) ASSERT_GE(s->Count(id), n);
  }
}

TEST(CountMinSketch, FromCellsRefusesARaggedOrNonPowerOfTwoWidth) {
  CountMinSketch s(64);
  std::vector<uint16_t> cells(4 * 100);
  EXPECT_EQ(CountMinSketch::FromCells(cells, &s).code(), absl::StatusCode::kInvalidArgument);
  cells.resize(4 * 128 + 1);
  EXPECT_EQ(CountMinSketch::FromCells(cells, &s).code(), absl::StatusCode::kInvalidArgument);
  cells.resize(4 * 128);
  EXPECT_TRUE(CountMinSketch::FromCells(cells, &s).ok());
  EXPECT_EQ(s.width(), 128u);
}

TEST(Admission, MinCountThreeAdmitsOnTheThirdPushAndDropsTheFirstTwo) {
  auto table = Make(Spec(3));
  auto reference = Make(Spec(1));
  PullRow(*reference, 77);  // creates its row
  // An id not admitted reads as zeros; pulls neither create the row nor
  // count.
  const std::vector<float> zeros(4, 0.0f);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PullRow(*table, 77), zeros);
  PushOne(*table, 77, 1.0f);
  PushOne(*table, 77, 1.0f);
  EXPECT_FALSE(table->Contains(77));
  EXPECT_EQ(table->size(), 0u);
  EXPECT_EQ(PullRow(*table, 77), zeros);  // the dropped gradients left no trace
  PushOne(*table, 77, 0.5f);
  EXPECT_TRUE(table->Contains(77));
  // The admitting push's gradient is applied to the initial row, once.
  PushOne(*reference, 77, 0.5f);
  EXPECT_EQ(PullRow(*table, 77), PullRow(*reference, 77));
  EXPECT_EQ(table->admission_stats().admitted, 1u);
  EXPECT_EQ(table->admission_stats().refused_ids, 2u);
  EXPECT_EQ(table->admission_stats().refused_pushes, 2u);
}

TEST(Admission, DuplicatesInOnePushEachCount) {
  auto table = Make(Spec(3));
  std::vector<uint64_t> ids = {5, 9, 5, 5};
  std::vector<float> grads(ids.size() * 4, 0.1f);
  ASSERT_TRUE(table->Push(ids, grads.data(), 1.0f).ok());
  EXPECT_TRUE(table->Contains(5));
  EXPECT_FALSE(table->Contains(9));
  EXPECT_EQ(table->admission_stats().refused_ids, 1u);
}

TEST(Admission, NoIdIsAdmittedLateUnderHeavyCollisions) {
  // Conservative update overcounts only: every id with three pushes holds a
  // row after its third, even in a sketch far smaller than the id set.
  TableSpec spec = Spec(3);
  spec.admission.sketch_bytes = 512;
  auto table = Make(spec);
  for (int round = 0; round < 3; ++round) {
    for (uint64_t id = 0; id < 2000; ++id) PushOne(*table, id * 131, 0.1f);
  }
  for (uint64_t id = 0; id < 2000; ++id) ASSERT_TRUE(table->Contains(id * 131)) << id;
}

TEST(Admission, AdmitProbabilityIsReproducibleAndNearP) {
  auto a = Make(Spec(1, 0.25f));
  auto b = Make(Spec(1, 0.25f));
  for (uint64_t id = 0; id < 10000; ++id) {
    PushOne(*a, id, 0.1f);
    PushOne(*b, id, 0.1f);
  }
  EXPECT_EQ(a->size(), b->size());
  for (uint64_t id = 0; id < 10000; ++id) ASSERT_EQ(a->Contains(id), b->Contains(id));
  EXPECT_GT(a->size(), 2200u);
  EXPECT_LT(a->size(), 2800u);
  EXPECT_EQ(a->admission_stats().admitted + a->admission_stats().refused_ids, 10000u);
}

TEST(Admission, MinCountWithACoinAdmitsByEitherRule) {
  // A sketch wide enough that collisions do not admit early.
  TableSpec spec = Spec(2, 0.1f);
  spec.admission.sketch_bytes = 1 << 20;
  auto table = Make(spec);
  for (uint64_t id = 0; id < 1000; ++id) PushOne(*table, id, 0.1f);
  const size_t by_coin = table->size();
  EXPECT_GT(by_coin, 50u);
  EXPECT_LT(by_coin, 150u);
  for (uint64_t id = 0; id < 1000; ++id) PushOne(*table, id, 0.1f);
  EXPECT_EQ(table->size(), 1000u);
}

TEST(Admission, SketchMemoryIsReportedAndFixed) {
  auto table = Make(Spec(2));
  const size_t before = table->memory_stats().sketch_bytes;
  EXPECT_EQ(before, 4096u);
  for (uint64_t id = 0; id < 100000; ++id) PushOne(*table, id, 0.1f);
  EXPECT_EQ(table->memory_stats().sketch_bytes, before);
  EXPECT_EQ(Make(Spec(1))->memory_stats().sketch_bytes, 0u);
}

TEST(Admission, BadOptionsAreRefused) {
  EXPECT_EQ(SparseTable::Create(Spec(0)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SparseTable::Create(Spec(70000)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SparseTable::Create(Spec(1, 0.0f)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SparseTable::Create(Spec(1, 1.5f)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::server
