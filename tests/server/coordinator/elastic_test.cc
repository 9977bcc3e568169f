// Elastic workers in one process: a worker that stops heartbeating is
// dropped, the others go on, and when it registers again it is re-admitted
// at a step no server has passed (BSP then waits for it again), or told that
// its shard was adopted.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"

#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

constexpr int kSize = 8;
constexpr absl::Duration kBeat = absl::Milliseconds(100);

std::vector<TableSpec> Tables() { return {DenseSpec(0, "w", kSize, Sgd(0.01f))}; }

// Elastic BSP, 2 servers (the table split over both, so every step touches
// both), 3 workers that heartbeat.
std::unique_ptr<TestCluster> ElasticCluster() {
  auto c = std::make_unique<TestCluster>(
      2, 3, proto::Consistency::kBsp, 0, /*chunk=*/kSize / 2, /*server_threads=*/1,
      [](server::CoordinatorOptions* o) {
        o->elastic_workers = true;
        o->worker_timeout = absl::Seconds(1);
        o->heartbeat_interval = kBeat;
      });
  for (int w = 0; w < 3; ++w) c->worker(w).coord->StartHeartbeats(kBeat, nullptr);
  c->DefineTables(Tables());
  return c;
}

absl::Status Step(worker::KvClient& kv, int64_t clock) {
  PS_RETURN_IF_ERROR(kv.Pull({0}, {}, clock).Wait().status());
  std::vector<float> g(kSize, 1.0f);
  return kv.Push({{0, Buffer::FromVector(std::move(g))}}, {}, 1, clock).Wait();
}

// Steps 0..2 on every worker, then worker 2 stops (no heartbeats, no
// pushes) and is dropped.
void RunThenDropWorker2(TestCluster& c) {
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&c, w] {
      for (int64_t s = 0; s < 3; ++s) ASSERT_TRUE(Step(c.kv(w), s).ok());
    });
  }
  for (auto& t : threads) t.join();
  c.worker(2).coord->StopHeartbeats();
  ASSERT_TRUE(c.worker(0).coord->StoreGet("dead/2", absl::Seconds(10)).ok()) << "worker 2 not dropped";
}

std::unique_ptr<worker::KvClient> KvFor(TestWorker& tw, int rank, const proto::TableLayout& layout) {
  auto view = tw.coord->WaitForCluster(absl::Seconds(10));
  EXPECT_TRUE(view.ok()) << view.status();
  std::vector<std::string> eps;
  for (const auto& s : view->servers) eps.push_back(s.endpoint);
  worker::KvClientOptions ko;
  ko.rank = rank;
  ko.request_timeout = absl::Seconds(20);
  return std::make_unique<worker::KvClient>(tw.node.get(), layout, eps, ko);
}

void Close(TestWorker& tw) {
  tw.coord->StopHeartbeats();
  tw.kv.reset();
  tw.coord.reset();
  tw.node->Stop();
}

// Worker 2 comes back: a new process with the same rank registers, defines
// the tables and asks to rejoin.
struct Returned {
  TestWorker worker;
  absl::StatusOr<proto::TableLayout> layout;
  absl::StatusOr<proto::Rejoin> rejoin;
};

Returned ComeBack(TestCluster& c) {
  Returned r{c.NewWorker("worker2-again", 2), absl::UnknownError("not defined"),
             absl::UnknownError("not asked")};
  r.worker.coord->StartHeartbeats(kBeat, nullptr);
  r.layout = r.worker.coord->DefineTables(Tables(), absl::Seconds(10));
  if (r.layout.ok()) r.rejoin = r.worker.coord->Rejoin();
  return r;
}

TEST(Elastic, DroppedWorkerIsReadmittedAtAStepNoServerPassedAndBspWaitsForItAgain) {
  auto c = ElasticCluster();
  RunThenDropWorker2(*c);
  // Workers 0 and 1 go on without it until told where to stop.
  std::atomic<int64_t> stop_at{INT64_MAX}, readmitted_at{INT64_MAX};
  absl::Time step_after[2];
  std::vector<std::thread> others;
  for (int w = 0; w < 2; ++w) {
    others.emplace_back([&, w] {
      for (int64_t s = 3; s < stop_at.load(); ++s) {
        ASSERT_TRUE(Step(c->kv(w), s).ok()) << "worker " << w << " step " << s;
        const int64_t r = readmitted_at.load();
        if (r != INT64_MAX && s == r + 1) step_after[w] = absl::Now();
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));  // they train a few steps alone

  Returned r = ComeBack(*c);
  auto& [back, layout, rejoin] = r;
  // A test stopped by a failed ASSERT still closes the worker in order.
  absl::Cleanup close_back = [&back] {
    if (back.coord != nullptr) Close(back);
  };
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_TRUE(rejoin.ok()) << rejoin.status();
  ASSERT_EQ(rejoin->state, proto::RejoinState::kResume);
  const int64_t step = rejoin->step;
  EXPECT_GE(step, 4) << "the others trained after the drop";
  EXPECT_EQ(rejoin->position.clock, step);
  readmitted_at = step;
  stop_at = step + 3;
  back.kv = KvFor(back, 2, *layout);
  // The others cannot complete step `step` without it.
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time pushed = absl::Now();
  for (int64_t s = step; s <= step + 3; ++s) {
    ASSERT_TRUE(Step(*back.kv, s).ok()) << "re-admitted worker, step " << s;
  }
  for (auto& t : others) t.join();
  for (int w = 0; w < 2; ++w) {
    EXPECT_GE(step_after[w], pushed) << "worker " << w << " passed step " << step
                                     << " without the re-admitted worker";
  }
  Close(back);
}

TEST(Elastic, WorkerReadmittedAfterTheOthersFinishedTrainsAlone) {
  auto c = ElasticCluster();
  RunThenDropWorker2(*c);
  // The others finish: the open step then has no push, and nobody else will
  // push one; the returning worker must not wait for it.
  std::vector<std::thread> others;
  for (int w = 0; w < 2; ++w) {
    others.emplace_back([&c, w] {
      for (int64_t s = 3; s < 5; ++s) ASSERT_TRUE(Step(c->kv(w), s).ok());
      ASSERT_TRUE(c->kv(w).Push({}, {}, 0, 5, /*retire=*/true).Wait().ok());
    });
  }
  for (auto& t : others) t.join();
  Returned r = ComeBack(*c);
  auto& [back, layout, rejoin] = r;
  // A test stopped by a failed ASSERT still closes the worker in order.
  absl::Cleanup close_back = [&back] {
    if (back.coord != nullptr) Close(back);
  };
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_TRUE(rejoin.ok()) << rejoin.status();
  ASSERT_EQ(rejoin->state, proto::RejoinState::kResume);
  EXPECT_EQ(rejoin->step, 5);
  back.kv = KvFor(back, 2, *layout);
  for (int64_t s = rejoin->step; s < rejoin->step + 3; ++s) {
    ASSERT_TRUE(Step(*back.kv, s).ok()) << "step " << s;
  }
  ASSERT_TRUE(back.kv->Push({}, {}, 0, rejoin->step + 3, /*retire=*/true).Wait().ok());
  Close(back);
}

TEST(Elastic, WorkerReturningAfterItsShardWasAdoptedIsToldItHasNothingToTrain) {
  auto c = ElasticCluster();
  RunThenDropWorker2(*c);
  auto claim = c->worker(0).coord->ClaimShard();
  ASSERT_TRUE(claim.ok()) << claim.status();
  ASSERT_EQ(claim->rank, 2);
  Returned r = ComeBack(*c);
  auto& [back, layout, rejoin] = r;
  // A test stopped by a failed ASSERT still closes the worker in order.
  absl::Cleanup close_back = [&back] {
    if (back.coord != nullptr) Close(back);
  };
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_TRUE(rejoin.ok()) << rejoin.status();
  EXPECT_EQ(rejoin->state, proto::RejoinState::kAdopted);
  EXPECT_EQ(rejoin->adopter, 0);
  EXPECT_TRUE(back.coord->WorkerDone().ok());
  // The others still train without it: BSP does not wait for it.
  std::vector<std::thread> others;
  for (int w = 0; w < 2; ++w) {
    others.emplace_back([&c, w] {
      for (int64_t s = 3; s < 6; ++s) ASSERT_TRUE(Step(c->kv(w), s).ok()) << "worker " << w;
    });
  }
  for (auto& t : others) t.join();
  Close(back);
}

}  // namespace
}  // namespace pstrain::testing
