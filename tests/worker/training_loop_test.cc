#include "worker/training_loop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace pstrain::worker {
namespace {

proto::WorkerPosition Position(int rank, int64_t clock, int epoch, int64_t rows, bool finished) {
  proto::WorkerPosition p;
  p.rank = rank;
  p.clock = clock;
  p.epoch = epoch;
  p.rows = rows;
  p.finished = finished;
  p.samples = rows;
  return p;
}

// A layout that restores a checkpoint taken at step 40 with worker 1 in
// epoch 1, and schedules the next checkpoint at step 60.
proto::TableLayout RestoredLayout(bool finished = false) {
  proto::TableLayout layout;
  layout.restored_step = 40;
  layout.checkpoint_step = 60;
  layout.positions = {Position(0, 40, 0, 100, false), Position(1, 40, 1, 30, finished)};
  layout.positions[1].state_file = "worker_state.bin";
  return layout;
}

TEST(TrainingLoop, FreshRunStartsAtStepZeroWithTheLayoutsCheckpointStep) {
  proto::TableLayout layout;
  layout.checkpoint_step = 20;
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/1);
  EXPECT_FALSE(loop.restored());
  EXPECT_FALSE(loop.RestoredPosition(/*epochs=*/3).has_value());
  absl::StatusOr<int64_t> skipped = loop.Resume(/*reader=*/nullptr, /*epochs=*/3);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(*skipped, 0);
  EXPECT_EQ(loop.position().rank, 1);
  EXPECT_EQ(loop.position().clock, 0);
  EXPECT_FALSE(loop.Reached(19));
  EXPECT_TRUE(loop.Reached(20));
  EXPECT_EQ(loop.position().clock, 20);
}

TEST(TrainingLoop, RestoredRunResumesAtItsRanksPositionWithoutTheStateFile) {
  proto::TableLayout layout = RestoredLayout();
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/1);
  ASSERT_TRUE(loop.restored());
  ASSERT_TRUE(loop.Resume(/*reader=*/nullptr, /*epochs=*/0).ok());
  EXPECT_EQ(loop.position().rank, 1);
  EXPECT_EQ(loop.position().clock, 40);
  EXPECT_EQ(loop.position().epoch, 1);
  EXPECT_EQ(loop.position().rows, 30);
  EXPECT_EQ(loop.position().samples, 30);
  EXPECT_TRUE(loop.position().state_file.empty());
  EXPECT_TRUE(loop.Reached(60));
}

TEST(TrainingLoop, RankWithoutARestoredPositionStartsAtStepZero) {
  proto::TableLayout layout = RestoredLayout();
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/2);
  EXPECT_FALSE(loop.RestoredPosition(/*epochs=*/0).has_value());
  ASSERT_TRUE(loop.Resume(/*reader=*/nullptr, /*epochs=*/0).ok());
  EXPECT_EQ(loop.position().rank, 2);
  EXPECT_EQ(loop.position().clock, 0);
}

TEST(TrainingLoop, FinishedPositionGoesOnIntoTheNextEpochOnlyWhenEpochsAreAdded) {
  proto::TableLayout layout = RestoredLayout(/*finished=*/true);
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/1);
  std::optional<proto::WorkerPosition> as_stored = loop.RestoredPosition(/*epochs=*/0);
  ASSERT_TRUE(as_stored.has_value());
  EXPECT_TRUE(as_stored->finished);
  std::optional<proto::WorkerPosition> same_epochs = loop.RestoredPosition(/*epochs=*/2);
  ASSERT_TRUE(same_epochs.has_value());
  EXPECT_TRUE(same_epochs->finished);  // epoch 1 was the last of 2
  std::optional<proto::WorkerPosition> more = loop.RestoredPosition(/*epochs=*/3);
  ASSERT_TRUE(more.has_value());
  EXPECT_FALSE(more->finished);
  EXPECT_EQ(more->epoch, 2);
  EXPECT_EQ(more->rows, 0);
  EXPECT_EQ(more->clock, 40);
}

TEST(TrainingLoop, CountRowsStartsANewEpochsRowsAtZero) {
  proto::TableLayout layout;
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/0);
  ASSERT_TRUE(loop.Resume(/*reader=*/nullptr, /*epochs=*/1).ok());
  loop.CountRows(0, 16);
  loop.CountRows(0, 16);
  loop.CountSamples(32);
  EXPECT_EQ(loop.position().epoch, 0);
  EXPECT_EQ(loop.position().rows, 32);
  loop.CountRows(1, 8);
  loop.CountSamples(8);
  EXPECT_EQ(loop.position().epoch, 1);
  EXPECT_EQ(loop.position().rows, 8);
  EXPECT_EQ(loop.position().samples, 40);
}

TEST(TrainingLoop, ArriveFinishedWithoutCheckpointsOnlyMarksThePosition) {
  proto::TableLayout layout;  // no checkpoints, nothing restored: no coordinator call
  TrainingLoop loop(&layout, /*coordinator=*/nullptr, /*rank=*/0);
  ASSERT_TRUE(loop.Resume(/*reader=*/nullptr, /*epochs=*/1).ok());
  ASSERT_TRUE(loop.ArriveFinished(12).ok());
  EXPECT_TRUE(loop.position().finished);
  EXPECT_EQ(loop.position().clock, 12);
}

TEST(TrainingLoop, NonFiniteLossIsAFailedPreconditionNamingTheStep) {
  EXPECT_TRUE(TrainingLoop::CheckLoss(3.5, 7).ok());
  absl::Status st = TrainingLoop::CheckLoss(NAN, 7);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "loss became non-finite at step 7 (learning rate too high?)");
  EXPECT_EQ(TrainingLoop::CheckLoss(INFINITY, 8).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TrainingLoop, ResumingMidEpochNeedsTheInputThePositionRecorded) {
  proto::WorkerPosition at;
  at.rank = 1;
  at.epoch = 0;
  at.rows = 5120;
  at.inputs = "1 file, 100 bytes, shard 2 of 2, digest 00000000000000aa";
  const std::string other = "2 files, 150 bytes, shard 2 of 2, digest 00000000000000bb";
  EXPECT_TRUE(CheckResumeInputs(at, at.inputs, 20).ok());
  const absl::Status st = CheckResumeInputs(at, other, 20);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("worker 1 cannot resume its data where the checkpoint of step 20 "
                              "left it (epoch 0, after row 5120 of its shard)"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find(at.inputs), std::string::npos) << st;
  EXPECT_NE(st.message().find(other), std::string::npos) << st;
  // Nothing to skip, or nothing recorded: any input.
  proto::WorkerPosition start = at;
  start.rows = 0;
  start.epoch = 1;
  EXPECT_TRUE(CheckResumeInputs(start, other, 20).ok());
  proto::WorkerPosition finished = at;
  finished.finished = true;
  EXPECT_TRUE(CheckResumeInputs(finished, other, 20).ok());
  proto::WorkerPosition older = at;
  older.inputs.clear();
  EXPECT_TRUE(CheckResumeInputs(older, other, 20).ok());
}

}  // namespace
}  // namespace pstrain::worker
