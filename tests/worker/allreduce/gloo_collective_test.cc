#include "worker/allreduce/gloo_collective.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace pstrain::worker {
namespace {

// Runs `fn(rank, collective)` on `size` ranks as threads of this process.
void RunRanks(int size, absl::Duration timeout,
              const std::function<void(int, GlooCollective&)>& fn, PeerProbe probe = nullptr,
              GlooOptions::Algorithm algorithm = GlooOptions::Algorithm::kBcube) {
  InMemoryRendezvousStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o;
      o.rank = r;
      o.size = size;
      o.timeout = timeout;
      o.probe = probe;
      o.algorithm = algorithm;
      auto c = GlooCollective::Create(o, &store);
      ASSERT_TRUE(c.ok()) << c.status();
      fn(r, **c);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(GlooCollective, AllReduceSumsAndAveragesInPlace) {
  RunRanks(3, absl::Seconds(20), [](int r, GlooCollective& c) {
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r * 1000 + i);
    ASSERT_TRUE(c.AllReduce(v.data(), v.size(), ReduceOp::kSum).ok());
    for (size_t i = 0; i < v.size(); ++i) ASSERT_FLOAT_EQ(v[i], 3000.0f + 3 * i) << i;
    std::vector<float> w(5, static_cast<float>(r));
    ASSERT_TRUE(c.AllReduce(w.data(), w.size(), ReduceOp::kAverage).ok());
    EXPECT_FLOAT_EQ(w[4], 1.0f);
  });
}

// Both algorithms, at group sizes that are and are not powers of two (bcube
// then ends with a group of the odd rest), on buffers that do not divide
// evenly: every rank ends with the same exact sums.
TEST(GlooCollective, RingAndBcubeGiveEveryRankTheSameSums) {
  for (auto algorithm : {GlooOptions::Algorithm::kRing, GlooOptions::Algorithm::kBcube}) {
    for (int size : {2, 4, 5, 6}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{1001}}) {
        SCOPED_TRACE(absl::StrCat(algorithm == GlooOptions::Algorithm::kRing ? "ring" : "bcube",
                                  ", ", size, " ranks, ", n, " floats"));
        RunRanks(
            size, absl::Seconds(20),
            [&](int r, GlooCollective& c) {
              std::vector<float> v(n);
              for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * 100 + i % 50);
              ASSERT_TRUE(c.AllReduce(v.data(), n, ReduceOp::kSum).ok());
              const float ranks = static_cast<float>(size);
              for (size_t i = 0; i < n; ++i) {
                // Small integers: exact in any order of summation.
                ASSERT_EQ(v[i], 100 * ranks * (ranks + 1) / 2 + ranks * (i % 50)) << i;
              }
            },
            nullptr, algorithm);
      }
    }
  }
}

TEST(GlooCollective, BroadcastCopiesTheRootsValuesAndBarrierReturns) {
  RunRanks(3, absl::Seconds(20), [](int r, GlooCollective& c) {
    std::vector<float> v(7, static_cast<float>(r + 10));
    ASSERT_TRUE(c.Broadcast(v.data(), v.size(), 1).ok());
    EXPECT_EQ(v, std::vector<float>(7, 11.0f));
    EXPECT_TRUE(c.Barrier().ok());
  });
}

TEST(GlooCollective, APeerThatNeverJoinsTheAllReduceFailsTheOthersNamingIt) {
  absl::Time start = absl::Now();
  std::atomic<int> finished{0};
  absl::Notification others_finished;
  RunRanks(
      3, absl::Seconds(2),
      [&](int r, GlooCollective& c) {
        if (r == 2) {
          // Rank 2 hangs: its group stays open (closing it at once could cut
          // the others' connections before they are made) but it never takes
          // part.
          others_finished.WaitForNotificationWithTimeout(absl::Seconds(30));
          return;
        }
        absl::Cleanup done = [&] {
          if (++finished == 2) others_finished.Notify();
        };
        std::vector<float> v(100, 1.0f);
        absl::Status st = c.AllReduce(v.data(), v.size(), ReduceOp::kSum);
        EXPECT_FALSE(st.ok());
        EXPECT_NE(st.message().find("rank(s) 2 not responding"), std::string::npos) << st;
        // The group is not used after a failure.
        EXPECT_EQ(c.AllReduce(v.data(), v.size(), ReduceOp::kSum).code(),
                  absl::StatusCode::kFailedPrecondition);
      },
      [] { return std::vector<int>{2}; });
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace pstrain::worker
