#include "server/ps/tables/row_footprint.h"

#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "server/ps/tables/row_index.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

TableSpec Spec(OptimizerKind kind, uint32_t dim, RowDtype dtype = RowDtype::kFloat32) {
  TableSpec spec;
  spec.id = 1;
  spec.name = "emb.C1";
  spec.kind = TableKind::kSparse;
  spec.dim = dim;
  spec.dtype = dtype;
  spec.optimizer.kind = kind;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.01f;
  return spec;
}

// A table of `spec` holding `rows` rows (ids 0..rows-1), made as training
// makes them: by pulls, or by pushes when the table has eviction.
std::unique_ptr<SparseTable> Filled(const TableSpec& spec, size_t rows) {
  auto table = SparseTable::Create(spec);
  EXPECT_TRUE(table.ok()) << table.status();
  constexpr size_t kBatch = 4096;
  std::vector<uint64_t> ids;
  std::vector<float> buf(kBatch * spec.dim, 0.0f);
  for (size_t begin = 0; begin < rows; begin += kBatch) {
    ids.clear();
    for (size_t id = begin; id < std::min(rows, begin + kBatch); ++id) ids.push_back(id);
    absl::Status st = spec.eviction.enabled() ? (*table)->Push(ids, buf.data(), 1.0f)
                                              : (*table)->Pull(ids, buf.data());
    EXPECT_TRUE(st.ok()) << st;
  }
  return *std::move(table);
}

TEST(RowFootprint, StrideIsTheRowATableStores) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad,
                             OptimizerKind::kRowwiseAdagrad, OptimizerKind::kAdam,
                             OptimizerKind::kFtrl}) {
    for (RowDtype dtype : {RowDtype::kFloat32, RowDtype::kFloat16, RowDtype::kBfloat16}) {
      for (uint32_t dim : {1u, 16u, 17u}) {
        for (bool evicts : {false, true}) {
          TableSpec spec = Spec(kind, dim, dtype);
          if (evicts) spec.eviction.max_rows = 1000;
          auto table = SparseTable::Create(spec);
          ASSERT_TRUE(table.ok()) << table.status();
          auto f = RowFootprintOf(spec, evicts);
          ASSERT_TRUE(f.ok()) << f.status();
          SCOPED_TRACE(testing::Message() << optim::OptimizerKindName(kind) << " " << RowDtypeName(dtype)
                                          << " dim " << dim << (evicts ? " evicting" : ""));
          EXPECT_EQ(f->stride_floats * sizeof(float), (*table)->row_bytes());
          EXPECT_DOUBLE_EQ(f->value_bytes + f->state_bytes + f->meta_bytes,
                           static_cast<double>((*table)->row_bytes()));
        }
      }
    }
  }
}

TEST(RowFootprint, OptimizerStateIsWhatEachOptimizerKeeps) {
  auto bytes = [](OptimizerKind kind, float momentum = 0) {
    TableSpec spec = Spec(kind, 16);
    spec.optimizer.momentum = momentum;
    return RowFootprintOf(spec, false)->state_bytes;
  };
  EXPECT_EQ(bytes(OptimizerKind::kSgd), 0);
  EXPECT_EQ(bytes(OptimizerKind::kSgd, 0.9f), 16 * 4);      // the velocity
  EXPECT_EQ(bytes(OptimizerKind::kAdagrad), 16 * 4);        // the accumulator
  EXPECT_EQ(bytes(OptimizerKind::kRowwiseAdagrad), 4);      // one per row
  EXPECT_EQ(bytes(OptimizerKind::kAdam), 2 * 16 * 4 + 4);   // m, v and the step count
  EXPECT_EQ(bytes(OptimizerKind::kFtrl), 2 * 16 * 4);       // z, n
  TableSpec fp16 = Spec(OptimizerKind::kAdagrad, 17, RowDtype::kFloat16);
  EXPECT_EQ(RowFootprintOf(fp16, false)->value_bytes, 9 * 4);  // 17 halves, padded
  EXPECT_EQ(RowFootprintOf(fp16, false)->state_bytes, 17 * 4);  // state stays fp32
}

TEST(RowFootprint, RefusesDenseTablesAndBadOptimizers) {
  TableSpec dense = Spec(OptimizerKind::kAdagrad, 16);
  dense.kind = TableKind::kDense;
  EXPECT_EQ(RowFootprintOf(dense, false).status().code(), absl::StatusCode::kInvalidArgument);
  TableSpec bad = Spec(OptimizerKind::kAdam, 16);
  bad.optimizer.beta1 = 2.0f;
  EXPECT_EQ(RowFootprintOf(bad, false).status().code(), absl::StatusCode::kInvalidArgument);
}

// The measurement behind the plan's overhead: real shards of 100 k to 300 k
// rows take at most the planned bytes (a row's footprint x rows + the
// shard's fixed part), and at least that less the fixed part and the
// index's spread between its lowest and highest load (22.5 - 15 bytes).
TEST(RowFootprint, PlannedBytesBoundARealShardsMemory) {
  struct Case {
    TableSpec spec;
    bool evicts;
  };
  TableSpec evicting = Spec(OptimizerKind::kAdagrad, 16);
  evicting.eviction.max_rows = 1 << 30;
  const Case cases[] = {{Spec(OptimizerKind::kAdagrad, 16), false},
                        {Spec(OptimizerKind::kAdam, 64, RowDtype::kFloat16), false},
                        {Spec(OptimizerKind::kSgd, 8), false},
                        {evicting, true}};
  const double spread = RowIndex::kMaxBytesPerId - 12.0 / 0.8;
  for (const Case& c : cases) {
    const double per_row = RowFootprintOf(c.spec, c.evicts)->total();
    for (size_t rows : {100000u, 160000u, 300000u}) {
      auto table = Filled(c.spec, rows);
      const MemoryStats m = table->memory_stats();
      ASSERT_EQ(m.rows, rows);
      const double planned = per_row * static_cast<double>(rows) + kShardFixedBytes;
      const double measured = static_cast<double>(m.total_bytes);
      std::printf("%s dim %u %s%s, %zu rows: %.1f bytes a row (index %.1f), planned %.1f + %.0f "
                  "MiB a shard: %.1f %% of the plan\n",
                  optim::OptimizerKindName(c.spec.optimizer.kind), c.spec.dim,
                  RowDtypeName(c.spec.dtype), c.evicts ? " evicting" : "", rows, measured / rows,
                  static_cast<double>(m.index_bytes) / rows, per_row, kShardFixedBytes / (1 << 20),
                  100 * measured / planned);
      EXPECT_LE(measured, planned) << rows << " rows";
      EXPECT_GE(measured, planned - kShardFixedBytes - spread * rows) << rows << " rows";
    }
  }
}

}  // namespace
}  // namespace pstrain::server
