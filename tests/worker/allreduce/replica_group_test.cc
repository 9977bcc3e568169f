#include "worker/allreduce/replica_group.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace pstrain::worker {
namespace {

std::vector<TableSpec> OneDenseTable() {
  TableSpec t;
  t.id = 0;
  t.name = "dense";
  t.kind = TableKind::kDense;
  t.size = 64;
  t.on_workers = true;
  t.init.kind = InitKind::kUniform;
  t.init.scale = 0.1f;
  return {t};
}

// One training step of rank `rank`'s replica: every gradient is rank + 1.
absl::StatusOr<double> Step(DenseReplica& r, int rank) {
  r.BeginStep();
  std::fill(r.grad(0), r.grad(0) + 64, static_cast<float>(rank + 1));
  r.OnReady(0);
  return r.Finish(1);
}

// The rollback of allreduce mode: a rank that tears its group down releases
// a peer blocked in an allreduce with it (long before the collective
// timeout), and the group rebuilt under the next epoch works again, its
// replicas back at their initial values.
TEST(ReplicaGroup, TearingDownReleasesABlockedPeerAndTheRebuiltGroupStartsOver) {
  InMemoryRendezvousStore store;
  std::atomic<int> built{0};
  std::vector<float> initial[2], rebuilt[2];
  absl::Status blocked_status;
  absl::Duration blocked_for;
  double total_after = 0;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      ReplicaGroupOptions o;
      o.rank = rank;
      o.size = 2;
      o.timeout = absl::Seconds(30);
      ReplicaGroup group(o, OneDenseTable(), &store);
      ASSERT_TRUE(group.Build(0).ok());
      initial[rank] = group.replica()->weights(0);
      ++built;
      while (built.load() < 2) absl::SleepFor(absl::Milliseconds(1));
      if (rank == 0) {
        // Blocked: rank 1 never joins this step.
        absl::Time t0 = absl::Now();
        blocked_status = Step(*group.replica(), rank).status();
        blocked_for = absl::Now() - t0;
      } else {
        absl::SleepFor(absl::Milliseconds(300));
      }
      group.Tear();
      ASSERT_FALSE(group.built());
      ASSERT_TRUE(group.Build(1).ok());
      rebuilt[rank] = group.replica()->weights(0);
      auto total = Step(*group.replica(), rank);
      ASSERT_TRUE(total.ok()) << total.status();
      if (rank == 0) total_after = *total;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(blocked_status.code(), absl::StatusCode::kUnavailable) << blocked_status;
  EXPECT_GE(blocked_for, absl::Milliseconds(200));  // it did wait for rank 1
  EXPECT_LT(blocked_for, absl::Seconds(10));         // but not for the timeout
  EXPECT_EQ(initial[0], initial[1]);
  EXPECT_EQ(rebuilt[0], initial[0]);
  EXPECT_EQ(rebuilt[1], initial[0]);
  EXPECT_EQ(total_after, 2.0);
}

}  // namespace
}  // namespace pstrain::worker
