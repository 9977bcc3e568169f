// The consistency policies on their own (consistency_policy.h): ASP, BSP
// and SSP's pull readiness, clocks, BSP steps, retirement, re-admission and
// restore, without a server. consistency_test.cc runs them in a cluster.
#include "server/ps/consistency_policy.h"

#include <memory>

#include "gtest/gtest.h"

namespace pstrain::server {
namespace {

using Push = ConsistencyPolicy::Push;

std::unique_ptr<ConsistencyPolicy> Make(proto::Consistency model, int32_t workers,
                                        int32_t staleness = 0) {
  proto::TableLayout layout;
  layout.consistency = model;
  layout.num_workers = workers;
  layout.staleness = staleness;
  return ConsistencyPolicy::Create(layout);
}

Push Step(int32_t worker, int64_t clock) {
  Push p;
  p.worker = worker;
  p.clock = clock;
  p.has_parts = true;
  p.has_samples = true;
  return p;
}

Push RetireOnly(int32_t worker, int64_t clock) {
  Push p;
  p.worker = worker;
  p.clock = clock;
  p.retire = true;
  return p;
}

TEST(ConsistencyPolicy, CreateGivesTheLayoutsModelForAtLeastOneWorker) {
  auto asp = Make(proto::Consistency::kAsp, 3);
  EXPECT_NE(dynamic_cast<AspPolicy*>(asp.get()), nullptr);
  EXPECT_EQ(asp->num_workers(), 3u);
  EXPECT_NE(dynamic_cast<BspPolicy*>(Make(proto::Consistency::kBsp, 2).get()), nullptr);
  EXPECT_NE(dynamic_cast<SspPolicy*>(Make(proto::Consistency::kSsp, 2, 1).get()), nullptr);
  auto none = Make(proto::Consistency::kBsp, 0);
  EXPECT_EQ(none->num_workers(), 1u);
  EXPECT_TRUE(none->is_worker(0));
  EXPECT_FALSE(none->is_worker(1));
  EXPECT_FALSE(none->is_worker(-1));
  // An unknown model serves like ASP.
  auto unknown = Make(static_cast<proto::Consistency>(7), 2);
  EXPECT_NE(dynamic_cast<AspPolicy*>(unknown.get()), nullptr);
}

TEST(AspPolicy, PullsNeverWaitAndAppliedPushesMoveTheClock) {
  auto asp = Make(proto::Consistency::kAsp, 2);
  EXPECT_FALSE(asp->sums_pushes());
  EXPECT_TRUE(asp->PullReady(1000));
  EXPECT_TRUE(asp->CheckPush(Step(0, 5)).ok());
  EXPECT_FALSE(asp->OnPush(Step(0, 5)));  // nothing to release
  EXPECT_EQ(asp->clocks()[0], 6);
  EXPECT_FALSE(asp->OnPush(Step(0, 2)));  // late: the clock does not go back
  EXPECT_EQ(asp->clocks()[0], 6);
  EXPECT_EQ(asp->ServerStep(), 6);
  EXPECT_FALSE(asp->CompleteStep(0).has_value());
  // A push that only retires does not move the clock.
  EXPECT_TRUE(asp->OnPush(RetireOnly(1, 9)));
  EXPECT_EQ(asp->clocks()[1], 0);
  EXPECT_TRUE(asp->is_retired(1));
}

TEST(SspPolicy, APullWaitsUntilTheSlowestActiveWorkerIsWithinStaleness) {
  auto ssp = Make(proto::Consistency::kSsp, 2, /*staleness=*/2);
  for (int64_t c = 0; c < 4; ++c) EXPECT_TRUE(ssp->OnPush(Step(0, c)));  // worker 0 at 4
  EXPECT_TRUE(ssp->PullReady(2));   // slowest 0 >= 2 - 2
  EXPECT_FALSE(ssp->PullReady(3));  // worker 1 still at 0
  ssp->OnPush(Step(1, 0));
  EXPECT_TRUE(ssp->PullReady(3));
  EXPECT_FALSE(ssp->PullReady(4));
  // A retired worker is no longer waited for.
  ssp->Retire(1);
  EXPECT_TRUE(ssp->PullReady(6));
  EXPECT_FALSE(ssp->PullReady(7));
}

TEST(BspPolicy, AStepCompletesOnceEveryActiveWorkerPushedIt) {
  auto bsp = Make(proto::Consistency::kBsp, 2);
  EXPECT_TRUE(bsp->sums_pushes());
  EXPECT_TRUE(bsp->PullReady(0));
  EXPECT_FALSE(bsp->PullReady(1));
  ASSERT_TRUE(bsp->CheckPush(Step(0, 0)).ok());
  EXPECT_FALSE(bsp->OnPush(Step(0, 0)));
  EXPECT_FALSE(bsp->CompleteStep(0).has_value());  // worker 1 owes step 0
  // Worker 0 may not push step 1 while step 0 is open.
  EXPECT_EQ(bsp->CheckPush(Step(0, 1)).code(), absl::StatusCode::kFailedPrecondition);
  bsp->OnPush(Step(1, 0));
  EXPECT_EQ(bsp->CompleteStep(0), 0);
  EXPECT_EQ(bsp->applied(), 1);
  EXPECT_TRUE(bsp->PullReady(1));
  EXPECT_EQ(bsp->ServerStep(), 1);
  EXPECT_FALSE(bsp->CompleteStep(0).has_value());  // nobody pushed step 1
  // A push for a step other than the open one, or twice, is refused.
  EXPECT_EQ(bsp->CheckPush(Step(0, 0)).code(), absl::StatusCode::kFailedPrecondition);
  bsp->OnPush(Step(0, 1));
  EXPECT_EQ(bsp->CheckPush(Step(0, 1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BspPolicy, ARetiringPushWithNothingInItDoesNotCountButStopsTheWait) {
  auto bsp = Make(proto::Consistency::kBsp, 2);
  const Push retire = RetireOnly(1, 0);
  EXPECT_FALSE(BspPolicy::Counts(retire));
  EXPECT_TRUE(BspPolicy::Counts(Step(0, 0)));
  bsp->OnPush(Step(0, 0));
  EXPECT_TRUE(bsp->OnPush(retire));  // release: pulls may be ready
  EXPECT_EQ(bsp->clocks()[1], 0);
  EXPECT_EQ(bsp->CompleteStep(0), 0);
  // Later steps complete with worker 0 alone.
  bsp->OnPush(Step(0, 1));
  EXPECT_EQ(bsp->CompleteStep(0), 1);
}

TEST(BspPolicy, APreparedReadmissionHoldsItsStepUntilTheCommit) {
  auto bsp = Make(proto::Consistency::kBsp, 2);
  constexpr uint64_t kEpoch = 4;
  bsp->Retire(1);
  bsp->OnPush(Step(0, 0));
  // Somebody pushed the open step 0: it may complete without the worker,
  // so it comes back at step 1.
  EXPECT_EQ(bsp->PrepareReadmission(1, kEpoch), 1);
  EXPECT_EQ(bsp->CompleteStep(kEpoch), 0);
  bsp->OnPush(Step(0, 1));
  EXPECT_FALSE(bsp->CompleteStep(kEpoch).has_value());  // held at step 1
  ASSERT_TRUE(bsp->CommitReadmission(1, 1, kEpoch).ok());
  EXPECT_FALSE(bsp->is_retired(1));
  EXPECT_EQ(bsp->clocks()[1], 1);
  EXPECT_FALSE(bsp->CompleteStep(kEpoch).has_value());  // now step 1 waits for it
  bsp->OnPush(Step(1, 1));
  EXPECT_EQ(bsp->CompleteStep(kEpoch), 1);
  // Nobody pushed the open step: the worker comes back at it.
  bsp->Retire(1);
  EXPECT_EQ(bsp->PrepareReadmission(1, kEpoch), 2);
  EXPECT_TRUE(bsp->DropReadmission(1));
  EXPECT_FALSE(bsp->DropReadmission(1));
}

TEST(BspPolicy, ACommitWithoutAPreparationOfThisEpochOrPastTheStepIsRefused) {
  auto bsp = Make(proto::Consistency::kBsp, 2);
  bsp->Retire(1);
  absl::Status none = bsp->CommitReadmission(1, 0, 1);
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.message().find("cannot take worker 1 back at step 0"), std::string::npos) << none;
  // Prepared in epoch 1, committed in epoch 2 (a rollback between).
  bsp->PrepareReadmission(1, 1);
  EXPECT_EQ(bsp->CommitReadmission(1, 0, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(bsp->DropReadmission(1));  // a refused commit drops the preparation
  // A step the server passed.
  auto passed = Make(proto::Consistency::kBsp, 2);
  passed->Retire(1);
  passed->OnPush(Step(0, 0));
  EXPECT_EQ(passed->PrepareReadmission(1, 1), 1);
  EXPECT_EQ(passed->CompleteStep(1), 0);
  EXPECT_EQ(passed->CommitReadmission(1, 0, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(passed->is_retired(1));
  // A preparation of an older epoch no longer holds a step.
  auto other = Make(proto::Consistency::kBsp, 2);
  other->Retire(1);
  other->PrepareReadmission(1, 1);
  other->OnPush(Step(0, 0));
  EXPECT_EQ(other->CompleteStep(2), 0);
  EXPECT_FALSE(other->DropReadmission(1));
  other->OnPush(Step(0, 1));
  EXPECT_EQ(other->CompleteStep(2), 1);
  other->PrepareReadmission(1, 2);
  EXPECT_EQ(other->CommitReadmission(1, 1, 2).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ConsistencyPolicy, AspAndSspTakeAWorkerBackAtTheSlowestActiveClock) {
  for (proto::Consistency model : {proto::Consistency::kAsp, proto::Consistency::kSsp}) {
    auto policy = Make(model, 3, 2);
    for (int64_t c = 0; c < 5; ++c) policy->OnPush(Step(0, c));  // 5
    for (int64_t c = 0; c < 3; ++c) policy->OnPush(Step(1, c));  // 3
    policy->Retire(2);
    EXPECT_EQ(policy->PrepareReadmission(2, 0), 3);
    // Another server proposed less: never below this server's slowest.
    ASSERT_TRUE(policy->CommitReadmission(2, 1, 0).ok());
    EXPECT_EQ(policy->clocks()[2], 3);
    EXPECT_FALSE(policy->is_retired(2));
    // Nobody else trains: the newest clock.
    policy->Retire(0);
    policy->Retire(1);
    policy->Retire(2);
    EXPECT_EQ(policy->PrepareReadmission(2, 0), 5);
    ASSERT_TRUE(policy->CommitReadmission(2, 7, 0).ok());
    EXPECT_EQ(policy->clocks()[2], 7);
  }
}

TEST(ConsistencyPolicy, RestoreStartsFromTheCheckpointsClocks) {
  for (proto::Consistency model :
       {proto::Consistency::kAsp, proto::Consistency::kBsp, proto::Consistency::kSsp}) {
    auto policy = Make(model, 2, 1);
    std::vector<proto::WorkerPosition> positions(3);
    positions[0].rank = 0;
    positions[0].clock = 40;
    positions[1].rank = 1;
    positions[1].clock = 37;
    positions[1].finished = true;
    positions[2].rank = 5;  // not a worker of this job: ignored
    positions[2].clock = 99;
    policy->Restore(positions, 40);
    EXPECT_EQ(policy->clocks()[0], 40);
    EXPECT_EQ(policy->clocks()[1], 37);
    EXPECT_TRUE(policy->is_retired(1));
    EXPECT_EQ(policy->applied(), 40);
    EXPECT_TRUE(policy->PullReady(40));
    EXPECT_EQ(policy->ServerStep(), 40);
    policy->Restore({}, -1);  // no checkpoint: step 0
    EXPECT_EQ(policy->applied(), 0);
  }
}

}  // namespace
}  // namespace pstrain::server
