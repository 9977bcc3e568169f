// Compact rows: sparse tables storing fp16/bf16 values (optimizer state in
// fp32) against the same table in fp32.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

TableSpec Spec(RowDtype dtype, OptimizerKind opt = OptimizerKind::kRowwiseAdagrad,
               uint32_t dim = 16) {
  TableSpec spec;
  spec.id = 5;
  spec.name = "emb.c1";
  spec.kind = TableKind::kSparse;
  spec.dim = dim;
  spec.optimizer.kind = opt;
  spec.optimizer.lr = 0.05f;
  spec.optimizer.initial_accumulator = 0.1f;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.05f;
  spec.init.seed = 3;
  spec.dtype = dtype;
  return spec;
}

std::unique_ptr<SparseTable> Make(const TableSpec& spec) {
  auto t = SparseTable::Create(spec);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<float> Pull(SparseTable& t, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * t.dim());
  EXPECT_TRUE(t.Pull(ids, out.data()).ok());
  return out;
}

TEST(CompactRows, NewRowsAreTheRoundedInitialValues) {
  for (RowDtype dtype : {RowDtype::kFloat16, RowDtype::kBfloat16}) {
    auto full = Make(Spec(RowDtype::kFloat32));
    auto compact = Make(Spec(dtype));
    std::vector<uint64_t> ids = {1, 99, 1ull << 40};
    const std::vector<float> want = Pull(*full, ids);
    const std::vector<float> got = Pull(*compact, ids);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const float rounded = dtype == RowDtype::kFloat16 ? HalfToFloat(FloatToHalf(want[i]))
                                                        : Bfloat16ToFloat(FloatToBfloat16(want[i]));
      EXPECT_EQ(got[i], rounded) << i;
    }
  }
}

TEST(CompactRows, ManySmallUpdatesTrackTheFp32Table) {
  // SGD steps far below one fp16 ulp of the value: rounding to nearest
  // would leave the value where it is; stochastic rounding moves it by
  // the right amount on average.
  for (RowDtype dtype : {RowDtype::kFloat16, RowDtype::kBfloat16}) {
    TableSpec full_spec = Spec(RowDtype::kFloat32, OptimizerKind::kSgd, 8);
    full_spec.optimizer.lr = 1e-5f;
    TableSpec compact_spec = full_spec;
    compact_spec.dtype = dtype;
    auto full = Make(full_spec);
    auto compact = Make(compact_spec);
    std::vector<uint64_t> ids;
    for (uint64_t id = 0; id < 64; ++id) ids.push_back(id);
    std::vector<float> grads(ids.size() * 8, 1.0f);  // every step: value -= 1e-5
    for (int step = 0; step < 2000; ++step) {
      ASSERT_TRUE(full->Push(ids, grads.data(), 1.0f).ok());
      ASSERT_TRUE(compact->Push(ids, grads.data(), 1.0f).ok());
    }
    const std::vector<float> a = Pull(*full, ids), b = Pull(*compact, ids);
    double drift = 0, moved = 0;
    auto fresh = Make(full_spec);
    const std::vector<float> start = Pull(*fresh, ids);
    for (size_t i = 0; i < a.size(); ++i) {
      drift += b[i] - a[i];
      moved += start[i] - b[i];
    }
    drift /= a.size();
    moved /= a.size();
    // Each value moved 0.02; on average the compact one within 5 % of it.
    EXPECT_NEAR(moved, 0.02, 0.001) << RowDtypeName(dtype);
    EXPECT_LT(std::fabs(drift), 0.001) << RowDtypeName(dtype);
  }
}

TEST(CompactRows, HalveTheValueBytesAndRestoreExactly) {
  auto full = Make(Spec(RowDtype::kFloat32));
  auto compact = Make(Spec(RowDtype::kFloat16));
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 5000; ++id) ids.push_back(id * 977);
  std::vector<float> grads(ids.size() * 16, 0.3f);
  ASSERT_TRUE(full->Push(ids, grads.data(), 1.0f).ok());
  ASSERT_TRUE(compact->Push(ids, grads.data(), 1.0f).ok());
  const MemoryStats f = full->memory_stats(), c = compact->memory_stats();
  EXPECT_EQ(f.rows, 5000u);
  EXPECT_EQ(c.value_bytes * 2, f.value_bytes);
  EXPECT_EQ(c.state_bytes, f.state_bytes);  // row-wise Adagrad: one float
  EXPECT_EQ(c.state_bytes, 5000u * 4);
  // Checkpoint and restore through the rows' fp32 view: the same rows.
  auto restored = Make(Spec(RowDtype::kFloat16));
  EXPECT_TRUE(compact->ForEachRow([&](const SparseRow& r) {
    ASSERT_TRUE(restored->InsertRow(r.id, r.values, r.state, r.step).ok());
  }).ok());
  EXPECT_EQ(Pull(*restored, ids), Pull(*compact, ids));
}

TEST(CompactRows, OddDimsAndEveryOptimizerWork) {
  for (OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam,
                            OptimizerKind::kFtrl, OptimizerKind::kRowwiseAdagrad}) {
    auto full = Make(Spec(RowDtype::kFloat32, opt, 5));
    auto compact = Make(Spec(RowDtype::kFloat16, opt, 5));
    std::vector<uint64_t> ids = {3, 4, 5};
    std::vector<float> grads = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, 0.6f, 0.7f, -0.8f,
                                0.9f, 1.0f, -1.1f, 1.2f, 1.3f, 1.4f, -1.5f};
    for (int step = 0; step < 20; ++step) {
      ASSERT_TRUE(full->Push(ids, grads.data(), 1.0f).ok());
      ASSERT_TRUE(compact->Push(ids, grads.data(), 1.0f).ok());
    }
    const std::vector<float> a = Pull(*full, ids), b = Pull(*compact, ids);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i], a[i], 0.01 + 0.01 * std::fabs(a[i])) << static_cast<int>(opt) << " " << i;
    }
  }
}

}  // namespace
}  // namespace pstrain::server
