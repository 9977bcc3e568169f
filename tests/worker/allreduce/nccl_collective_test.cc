// NCCL on a real GPU: skipped on machines without one (and in builds without
// CUDA). With one GPU, a 1-rank communicator is checked end to end (NCCL
// refuses two ranks on the same device).
#include "worker/allreduce/nccl_collective.h"

#include <gtest/gtest.h>

#include "model/nn/device.h"

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

}  // namespace
}  // namespace pstrain::worker
