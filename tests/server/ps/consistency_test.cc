// BSP, SSP and ASP as the workers see them, with the servers' shards owned
// by their I/O threads (1) and split among executor threads (3).
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

constexpr int kDim = 8;
constexpr int kEmbDim = 4;

// A toy regression whose gradients depend on the pulled parameters:
// prediction = w . x + sum of the embedding row of the sample's id.
struct Sample {
  float x[kDim];
  uint64_t id;
  float y;
};

std::vector<Sample> MakeBatch(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<Sample> b(n);
  for (auto& s : b) {
    for (float& v : s.x) v = nd(rng);
    s.id = rng() % 13;
    s.y = nd(rng);
  }
  return b;
}

std::vector<TableSpec> Tables() {
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.1f;
  adagrad.initial_accumulator = 0.1f;
  InitializerConfig init{InitKind::kUniform, 0.5f, 11};
  return {DenseSpec(0, "w", kDim, adagrad, init), SparseSpec(1, "emb", kEmbDim, adagrad, init)};
}

// One step of `batch` at `clock`: pull, gradient of the summed loss, push.
absl::Status Step(worker::KvClient& kv, const std::vector<Sample>& batch, int64_t clock) {
  std::vector<uint64_t> ids;
  for (const Sample& s : batch) {
    if (std::find(ids.begin(), ids.end(), s.id) == ids.end()) ids.push_back(s.id);
  }
  std::vector<float> rows(ids.size() * kEmbDim);
  PS_ASSIGN_OR_RETURN(auto dense, kv.Pull({0}, {worker::SparsePull{1, ids, rows.data()}}, clock).Wait());
  auto w = dense[0].as<float>();
  std::vector<float> gw(kDim, 0.0f), gr(rows.size(), 0.0f);
  for (const Sample& s : batch) {
    size_t r = std::find(ids.begin(), ids.end(), s.id) - ids.begin();
    float pred = 0;
    for (int j = 0; j < kDim; ++j) pred += w[j] * s.x[j];
    for (int j = 0; j < kEmbDim; ++j) pred += rows[r * kEmbDim + j];
    float err = pred - s.y;
    for (int j = 0; j < kDim; ++j) gw[j] += err * s.x[j];
    for (int j = 0; j < kEmbDim; ++j) gr[r * kEmbDim + j] += err;
  }
  return kv.Push({{0, Buffer::FromVector(std::move(gw))}},
                 {{1, ids, Buffer::FromVector(std::move(gr))}}, static_cast<uint32_t>(batch.size()),
                 clock)
      .Wait();
}

std::vector<float> Snapshot(worker::KvClient& kv, int64_t clock) {
  std::vector<uint64_t> ids(13);
  for (uint64_t i = 0; i < 13; ++i) ids[i] = i;
  std::vector<float> rows(13 * kEmbDim);
  auto dense = kv.Pull({0}, {worker::SparsePull{1, ids, rows.data()}}, clock).Wait();
  EXPECT_TRUE(dense.ok()) << dense.status();
  std::vector<float> all((*dense)[0].as<float>().begin(), (*dense)[0].as<float>().end());
  all.insert(all.end(), rows.begin(), rows.end());
  return all;
}

class Consistency : public ::testing::TestWithParam<int> {
 protected:
  int threads() const { return GetParam(); }
};

TEST_P(Consistency, BspWithTwoWorkersEqualsOneWorkerOnTheUnionOfTheBatches) {
  constexpr int kSteps = 12;
  std::vector<std::vector<Sample>> half[2];
  for (int s = 0; s < kSteps; ++s) {
    half[0].push_back(MakeBatch(16, 100 + s));
    half[1].push_back(MakeBatch(24, 200 + s));  // uneven halves on purpose
  }
  std::vector<float> two, one;
  {
    TestCluster c(2, 2, proto::Consistency::kBsp, 0, 1 << 16, threads());
    c.DefineTables(Tables());
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(Step(c.kv(w), half[w][s], s).ok());
      });
    }
    for (auto& t : threads) t.join();
    two = Snapshot(c.kv(0), kSteps);
  }
  {
    TestCluster c(1, 1, proto::Consistency::kBsp);
    c.DefineTables(Tables());
    for (int s = 0; s < kSteps; ++s) {
      std::vector<Sample> both = half[0][s];
      both.insert(both.end(), half[1][s].begin(), half[1][s].end());
      ASSERT_TRUE(Step(c.kv(0), both, s).ok());
    }
    one = Snapshot(c.kv(0), kSteps);
  }
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    double rel = std::abs(one[i] - two[i]) / std::max(1e-6, std::abs(static_cast<double>(one[i])));
    EXPECT_LT(rel, 1e-5) << "parameter " << i << ": " << one[i] << " vs " << two[i];
  }
}

TEST_P(Consistency, BspPullOfTheNextStepWaitsForEveryWorkersPush) {
  TestCluster c(1, 2, proto::Consistency::kBsp, 0, 1 << 16, threads());
  c.DefineTables(Tables());
  auto batch = MakeBatch(4, 1);
  ASSERT_TRUE(Step(c.kv(0), batch, 0).ok());
  worker::PullHandle next = c.kv(0).Pull({0}, {}, 1);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_GT(c.server(0).stats().parked_pulls, 0u);
  ASSERT_TRUE(Step(c.kv(1), batch, 0).ok());  // the second worker completes step 0
  EXPECT_TRUE(next.Wait().ok());
}

TEST_P(Consistency, SspFastWorkerNeverRunsMoreThanStalenessAheadOfASlowOne) {
  constexpr int kStaleness = 2;
  constexpr int kSteps = 15;
  TestCluster c(2, 2, proto::Consistency::kSsp, kStaleness, 1 << 16, threads());
  c.DefineTables(Tables());
  std::atomic<int> slow_pushes_started{0};
  std::atomic<int> max_lead{0};
  std::thread slow([&] {
    auto batch = MakeBatch(4, 9);
    for (int s = 0; s < kSteps; ++s) {
      absl::SleepFor(absl::Milliseconds(30));
      slow_pushes_started.fetch_add(1);  // counted before the server can see it
      ASSERT_TRUE(Step(c.kv(1), batch, s).ok());
    }
  });
  auto batch = MakeBatch(4, 8);
  for (int s = 0; s < kSteps; ++s) {
    // Step() pulls at clock s first; once that pull returns, the slow worker
    // must be within `staleness` clocks.
    std::vector<uint64_t> ids = {1};
    std::vector<float> rows(kEmbDim);
    ASSERT_TRUE(c.kv(0).Pull({0}, {worker::SparsePull{1, ids, rows.data()}}, s).Wait().ok());
    int lead = s - slow_pushes_started.load();
    max_lead = std::max(max_lead.load(), lead);
    EXPECT_LE(lead, kStaleness) << "at step " << s;
    ASSERT_TRUE(Step(c.kv(0), batch, s).ok());
  }
  slow.join();
  // The fast worker did get ahead (the bound was exercised, not idle).
  EXPECT_EQ(max_lead.load(), kStaleness);
}

TEST_P(Consistency, AspFastWorkerFinishesWhileAnotherWorkerIsStalled) {
  TestCluster c(2, 2, proto::Consistency::kAsp, 0, 1 << 16, threads());
  c.DefineTables(Tables());
  auto batch = MakeBatch(4, 5);
  // Worker 1 never makes a step; worker 0 must not wait for it.
  absl::Time start = absl::Now();
  for (int s = 0; s < 30; ++s) ASSERT_TRUE(Step(c.kv(0), batch, s).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_EQ(c.server(0).stats().parked_pulls, 0u);
}

INSTANTIATE_TEST_SUITE_P(ServerThreads, Consistency, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Threads" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace pstrain::testing
