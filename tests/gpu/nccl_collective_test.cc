// NCCL on a real GPU (label gpu): skipped on machines without one (and in
// builds without CUDA). A 1-rank communicator is checked end to end; two
// ranks sum as Gloo does on the same inputs where NCCL takes two ranks on
// the GPUs there are (one GPU: NCCL refuses two ranks on one device, and the
// test says so when it skips).
#include "worker/allreduce/nccl_collective.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "model/nn/device.h"
#include "worker/allreduce/gloo_collective.h"

namespace pstrain::worker {
namespace {

TEST(NcclCollective, OneRankCommunicatorReducesBroadcastsAndBarriersOnTheGpu) {
  if (!NcclBuilt()) GTEST_SKIP() << "built without CUDA/NCCL";
  auto device = nn::CreateDevice("cuda");
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status();
  InMemoryRendezvousStore store;
  NcclOptions o;
  o.timeout = absl::Seconds(30);
  auto c = CreateNcclCollective(o, &store);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> host = {1, 2, 3, 4};
  auto mem = (*device)->Allocate(host.size() * sizeof(float));
  ASSERT_TRUE(mem.ok());
  float* d = static_cast<float*>(*mem);
  ASSERT_TRUE((*device)->CopyToDevice(d, host.data(), host.size() * sizeof(float)).ok());
  ASSERT_TRUE((*c)->AllReduce(d, host.size(), ReduceOp::kSum).ok());
  ASSERT_TRUE((*c)->Broadcast(d, host.size(), 0).ok());
  ASSERT_TRUE((*c)->Barrier().ok());
  std::vector<float> back(host.size());
  ASSERT_TRUE((*device)->CopyToHost(back.data(), d, back.size() * sizeof(float)).ok());
  EXPECT_EQ(back, host);  // the sum over one rank is the identity
  (*device)->Free(d);
}

TEST(NcclCollective, MissingPeerEndsAtTheDeadlineInsteadOfHanging) {
  if (!NcclBuilt()) GTEST_SKIP() << "built without CUDA/NCCL";
  auto device = nn::CreateDevice("cuda");
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status();
  InMemoryRendezvousStore store;
  NcclOptions o;
  o.rank = 1;  // rank 0 never comes: no unique id
  o.size = 2;
  o.timeout = absl::Seconds(2);
  absl::Time start = absl::Now();
  auto c = CreateNcclCollective(o, &store);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

// Two ranks (threads), each with its own inputs, summed by `reduce`; returns
// each rank's result, or the first error.
template <class Reduce>
absl::StatusOr<std::vector<std::vector<float>>> TwoRanks(const std::vector<std::vector<float>>& in,
                                                         Reduce reduce) {
  std::vector<std::vector<float>> out = in;
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { status[r] = reduce(r, &out[r]); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  return out;
}

TEST(NcclCollective, TwoRanksSumAsGlooDoesOnTheSameInputs) {
  if (!NcclBuilt()) GTEST_SKIP() << "built without CUDA/NCCL";
  auto probe = nn::CreateDevice("cuda");
  if (!probe.ok()) GTEST_SKIP() << "no GPU: " << probe.status();
  int gpus = 0;
  for (int d = 0; d < 8 && nn::CreateDevice("cuda:" + std::to_string(d)).ok(); ++d) gpus = d + 1;
  // Sizes around NCCL's and Gloo's chunkings, not multiples of either.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> in(2, std::vector<float>((1 << 20) + 3));
  for (auto& v : in) {
    for (float& x : v) x = u(rng);
  }
  InMemoryRendezvousStore gloo_store;
  auto gloo = TwoRanks(in, [&](int r, std::vector<float>* v) -> absl::Status {
    GlooOptions o;
    o.rank = r;
    o.size = 2;
    o.timeout = absl::Seconds(30);
    auto c = GlooCollective::Create(o, &gloo_store);
    if (!c.ok()) return c.status();
    return (*c)->AllReduce(v->data(), v->size(), ReduceOp::kSum);
  });
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  InMemoryRendezvousStore nccl_store;
  auto nccl = TwoRanks(in, [&](int r, std::vector<float>* v) -> absl::Status {
    auto device = nn::CreateDevice("cuda:" + std::to_string(r % gpus));
    if (!device.ok()) return device.status();
    NcclOptions o;
    o.rank = r;
    o.size = 2;
    o.device = r % gpus;
    o.timeout = absl::Seconds(30);
    auto c = CreateNcclCollective(o, &nccl_store);
    if (!c.ok()) return c.status();
    const size_t bytes = v->size() * sizeof(float);
    auto mem = (*device)->Allocate(bytes);
    if (!mem.ok()) return mem.status();
    float* d = static_cast<float*>(*mem);
    absl::Status st = (*device)->CopyToDevice(d, v->data(), bytes);
    if (st.ok()) st = (*c)->AllReduce(d, v->size(), ReduceOp::kSum);
    if (st.ok()) st = (*device)->CopyToHost(v->data(), d, bytes);
    (*device)->Free(d);
    return st;
  });
  if (!nccl.ok() && gpus < 2) {
    GTEST_SKIP() << "NCCL takes no two ranks on this machine's one GPU: " << nccl.status();
  }
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  // a + b is the same float in either order: the sums are equal exactly.
  for (int r = 0; r < 2; ++r) {
    size_t bad = 0;
    for (size_t i = 0; i < in[r].size(); ++i) {
      if ((*nccl)[r][i] != (*gloo)[r][i] && ++bad <= 3) {
        ADD_FAILURE() << "rank " << r << " [" << i << "]: nccl " << (*nccl)[r][i] << " gloo "
                      << (*gloo)[r][i];
      }
    }
    EXPECT_EQ(bad, 0u) << "rank " << r;
  }
}

}  // namespace
}  // namespace pstrain::worker
