// SparseTable at one million rows: the memory bound (asserted) and the
// pull/push rates (printed, never asserted: CI machines vary).
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/hash.h"
#include "gtest/gtest.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

constexpr size_t kRows = 1'000'000;
constexpr uint32_t kDim = 16;
constexpr size_t kBatch = 4096;

TableSpec Spec(OptimizerKind kind) {
  TableSpec spec;
  spec.id = 1;
  spec.name = "emb.scale";
  spec.kind = TableKind::kSparse;
  spec.dim = kDim;
  spec.optimizer.kind = kind;
  spec.init.kind = InitKind::kUniform;
  spec.init.scale = 0.01f;
  return spec;
}

std::vector<uint64_t> DistinctIds() {
  std::vector<uint64_t> ids(kRows);
  for (size_t i = 0; i < kRows; ++i) ids[i] = Mix64(i);  // bijective: all distinct
  return ids;
}

// Random requests over the existing rows, as a worker's batches would be.
std::vector<uint64_t> RandomRequests(const std::vector<uint64_t>& ids, size_t count) {
  std::vector<uint64_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = ids[Mix64(i ^ 0xabcdef) % ids.size()];
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class SparseTableScale : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(SparseTableScale, OverheadStaysUnder32BytesPerRowAtOneMillionRows) {
  auto table = SparseTable::Create(Spec(GetParam()));
  ASSERT_TRUE(table.ok());
  const std::vector<uint64_t> ids = DistinctIds();
  std::vector<float> out(kBatch * kDim);
  auto start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < kRows; b += kBatch) {
    size_t n = std::min(kBatch, kRows - b);
    ASSERT_TRUE((*table)->Pull({ids.data() + b, n}, out.data()).ok());
  }
  double create_s = Seconds(start);
  MemoryStats stats = (*table)->memory_stats();
  ASSERT_EQ(stats.rows, kRows);
  EXPECT_EQ(stats.value_bytes, kRows * kDim * sizeof(float));
  const double overhead =
      static_cast<double>(stats.total_bytes - stats.value_bytes - stats.state_bytes) / kRows;
  std::printf("[ rows     ] %s dim %u: %.1f bytes/row total (values %zu, state %.1f, "
              "overhead %.2f); created %.2f M rows/s\n",
              optim::OptimizerKindName(GetParam()), kDim,
              static_cast<double>(stats.total_bytes) / kRows, kDim * sizeof(float),
              static_cast<double>(stats.state_bytes) / kRows, overhead, kRows / create_s / 1e6);
  EXPECT_LT(overhead, 32.0);
}

TEST_P(SparseTableScale, ReportsPullAndPushRates) {
  auto table = SparseTable::Create(Spec(GetParam()));
  ASSERT_TRUE(table.ok());
  const std::vector<uint64_t> ids = DistinctIds();
  std::vector<float> out(kBatch * kDim);
  for (size_t b = 0; b < kRows; b += kBatch) {
    ASSERT_TRUE((*table)->Pull({ids.data() + b, std::min(kBatch, kRows - b)}, out.data()).ok());
  }
  const std::vector<uint64_t> requests = RandomRequests(ids, 512 * kBatch);
  std::vector<float> grads(kBatch * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;

  auto start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < requests.size(); b += kBatch) {
    ASSERT_TRUE((*table)->Pull({requests.data() + b, kBatch}, out.data()).ok());
  }
  double pull_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < requests.size(); b += kBatch) {
    ASSERT_TRUE((*table)->Push({requests.data() + b, kBatch}, grads.data(), 1.0f / 256).ok());
  }
  double push_s = Seconds(start);
  std::printf("[ rates    ] %s dim %u, %zu rows, batches of %zu random ids: "
              "pull %.2f M rows/s, push %.2f M rows/s\n",
              optim::OptimizerKindName(GetParam()), kDim, kRows, kBatch,
              requests.size() / pull_s / 1e6, requests.size() / push_s / 1e6);
  EXPECT_EQ((*table)->size(), kRows);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, SparseTableScale,
                         ::testing::Values(OptimizerKind::kAdagrad,
                                           OptimizerKind::kRowwiseAdagrad, OptimizerKind::kAdam),
                         [](const auto& info) {
                           return std::string(optim::OptimizerKindName(info.param));
                         });

}  // namespace
}  // namespace pstrain::server
