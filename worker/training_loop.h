// TrainingLoop: what a worker's training loop does the same way in every
// mode (ps, allreduce, pipeline), whatever runs a step: where the run
// starts (the position a restored checkpoint holds for this worker, its
// data read past what was trained before), where the worker stands as it
// trains (the position each checkpoint records), the pause at a checkpoint
// step and the arrival once training is over, after which checkpoints no
// longer wait for it.
//
// The trainers (worker/trainer.h, worker/pipeline/pipeline_trainer.h) own
// one each; they run the steps and the evaluation rounds, say what a step
// trained (CountRows, CountSamples, Reached) and, when a checkpoint is due,
// put their pushes on the servers before they call Checkpoint.
//
// Not thread-safe: the trainer's thread uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster/coordinator_client.h"
#include "common/buffer.h"
#include "data/batch.h"
#include "proto_msgs/messages.h"

namespace pstrain::worker {

class DataReader;

class TrainingLoop {
 public:
  // `layout` (the cluster's: a restored checkpoint, the checkpoint steps)
  // and `coordinator` must outlive the loop.
  TrainingLoop(const proto::TableLayout* layout, CoordinatorClient* coordinator, int rank);

  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  // Whether the layout restored a checkpoint (after a rollback of the
  // cluster, or --restore).
  bool restored() const { return layout_->restored_step >= 0; }

  // The position the restored checkpoint holds for this worker; none when
  // nothing was restored or it holds none for this rank. `epochs` > 0: a
  // position that had finished before the last of `epochs` epochs goes on
  // at the next epoch's start (a finished job trained on with more
  // --epochs); 0: as stored.
  std::optional<proto::WorkerPosition> RestoredPosition(int epochs) const;

  // Where the run starts: RestoredPosition(epochs) (without the worker-held
  // state's file, which the checkpoint consumed), else step 0; and the first
  // checkpoint step. A `reader` (may be null) not finished is read past the
  // rows trained before, so that the resumed run sees exactly the data an
  // unbroken one would. Returns the rows skipped.
  // REQUIRES: called once, before the rest.
  // `reader_at_position`: the reader was opened at the position's place in
  // its shard (ReaderOptions::start): nothing is skipped, and the rows
  // before it in its epoch are returned.
  absl::StatusOr<int64_t> Resume(DataReader* reader, int epochs, bool reader_at_position = false);

  // Where this worker stands: its clock (steps trained), data epoch and the
  // rows of that epoch trained, the samples trained in all.
  const proto::WorkerPosition& position() const { return position_; }

  // A step trained `rows` rows of 0-based data epoch `epoch` (a new epoch's
  // rows count from 0).
  // `end`: the reader's position after them (data/batch.h).
  void CountRows(int epoch, int64_t rows, const SourcePosition& end = {});
  // ... and `samples` samples (elastic: also those of an adopted shard).
  void CountSamples(int64_t samples) { position_.samples += samples; }
  // The worker has trained `clock` steps. Returns whether the checkpoint is
  // due now.
  bool Reached(int64_t clock);

  // Pauses for the checkpoint at position().clock: arrives at the
  // coordinator with this worker's position and `state` (worker-held
  // tables, may be empty), waits for the checkpoint and learns the next
  // checkpoint step. `log`: logs where the checkpoint went (the lead).
  // REQUIRES: Reached() said so; this worker's gradients of every step
  // before are on the servers.
  absl::Status Checkpoint(Buffer state, bool log);

  // Training is over after `clock` steps: the position says finished and,
  // where checkpoints are taken (or the run was restored), is reported, so
  // that checkpoints stop waiting for this worker.
  absl::Status ArriveFinished(int64_t clock);

  // Reads `reader` up to row `rows` of 0-based epoch `epoch` (whole
  // batches); returns the rows skipped.
  static absl::StatusOr<int64_t> SkipTo(DataReader* reader, int32_t epoch, int64_t rows);

  // FailedPrecondition, naming the step, when a step's loss is not finite.
  static absl::Status CheckLoss(double loss_sum, int64_t step);

 private:
  const proto::TableLayout* layout_;
  CoordinatorClient* coordinator_;
  proto::WorkerPosition position_;
  int64_t checkpoint_step_ = -1;  // the next checkpoint's (-1: none)
};

// OK when a worker at position `at` of the checkpoint of `step` may resume
// reading `inputs` (DataReader::inputs()): the same input as the position
// recorded, or a position that skips no rows (finished, at an epoch's
// start, or recorded without its input). FailedPrecondition naming both
// otherwise. Also the launcher's check before it starts anything.
absl::Status CheckResumeInputs(const proto::WorkerPosition& at, const std::string& inputs,
                               int64_t step);

}  // namespace pstrain::worker
