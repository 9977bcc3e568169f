// Barriers never wait in silence: a wait that ends before the barrier is
// full says whom it still waits for and what the coordinator last heard of
// them, and a wait in slices (WaitAtBarrier) runs its work between them and
// ends the moment the last member arrives.
#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;

TEST(Barrier, ATimedOutWaitNamesTheWorkersNotArrivedAndWhatTheyDo) {
  TestCluster c(1, 3);
  // Worker 1 heartbeats, so the coordinator knows its step.
  proto::Heartbeat hb;
  hb.step = 1234;
  hb.samples_per_sec = 500;
  c.worker(1).coord->StartHeartbeats(absl::Milliseconds(50), [hb] { return hb; });
  absl::SleepFor(absl::Milliseconds(300));
  std::thread two([&] { (void)c.worker(2).coord->Barrier("trained", 3, absl::Seconds(2)); });
  absl::SleepFor(absl::Milliseconds(100));
  absl::Status st = c.worker(0).coord->Barrier("trained", 3, absl::Milliseconds(400));
  two.join();
  c.worker(1).coord->StopHeartbeats();
  ASSERT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(st.message(), HasSubstr("barrier trained: 2 of 3 arrived; waiting for worker 1 (at step 1234"))
      << st;
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("worker 2"))) << st;
}

TEST(Barrier, TheCoordinatorHoldsAnEntryAsLongAsTheCallerWaits) {
  // Before, the coordinator's own wait was 10 minutes whatever the caller
  // asked: a caller's short wait ended on its side only.
  TestCluster c(1, 2);
  const absl::Time t0 = absl::Now();
  absl::Status st = c.worker(0).coord->Barrier("b", 2, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - t0;
  ASSERT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(st.message(), HasSubstr("barrier b: 1 of 2 arrived"));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_GE(took, absl::Milliseconds(250));
}

TEST(Barrier, WaitAtBarrierRunsItsWorkBetweenSlicesAndEndsWhenTheLastArrives) {
  TestCluster c(1, 2);
  std::atomic<int> between{0};
  std::atomic<int64_t> arrived_ms{0};
  const absl::Time t0 = absl::Now();
  std::thread late([&] {
    // Arrives once the waiter has done its work between two slices.
    while (between.load() < 2) absl::SleepFor(absl::Milliseconds(20));
    arrived_ms = absl::ToInt64Milliseconds(absl::Now() - t0);
    EXPECT_TRUE(c.worker(1).coord->Barrier("trained", 2, absl::Seconds(10)).ok());
  });
  absl::Status st = c.worker(0).coord->WaitAtBarrier("trained", 2, absl::Seconds(60), "the test",
                                                     [&] {
                                                       ++between;
                                                       return absl::OkStatus();
                                                     });
  const absl::Duration took = absl::Now() - t0;
  late.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_GE(between.load(), 2);
  // Within a slice (1 s) and a round trip of the last arrival.
  EXPECT_LT(took, absl::Milliseconds(arrived_ms.load()) + absl::Seconds(3));
}

TEST(Barrier, WaitAtBarrierFailsAfterItsTimeoutNamingWhoIsMissing) {
  TestCluster c(1, 2);
  absl::Status st = c.worker(0).coord->WaitAtBarrier("trained", 2, absl::Milliseconds(1500),
                                                     "the other workers");
  ASSERT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("for the other workers: barrier trained: 1 of 2 arrived; "
                                      "waiting for worker 1"));
}

TEST(Barrier, AnErrorOfTheWorkBetweenSlicesEndsTheWait) {
  TestCluster c(1, 2);
  absl::Status st = c.worker(0).coord->WaitAtBarrier(
      "trained", 2, absl::Seconds(30), "x", [] { return absl::AbortedError("rolled back"); });
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
}

}  // namespace
}  // namespace pstrain::testing
