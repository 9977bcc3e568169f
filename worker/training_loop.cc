#include "worker/training_loop.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/reader.h"

namespace pstrain::worker {

TrainingLoop::TrainingLoop(const proto::TableLayout* layout, CoordinatorClient* coordinator,
                           int rank)
    : layout_(layout), coordinator_(coordinator) {
  position_.rank = rank;
}

std::optional<proto::WorkerPosition> TrainingLoop::RestoredPosition(int epochs) const {
  if (!restored()) return std::nullopt;
  std::optional<proto::WorkerPosition> position;
  for (const proto::WorkerPosition& p : layout_->positions) {
    if (p.rank == position_.rank) position = p;
  }
  if (position && position->finished && epochs > 0 && position->epoch + 1 < epochs) {
    // A finished job trained on with more --epochs: the next epoch from
    // its start.
    position->finished = false;
    position->epoch += 1;
    position->rows = 0;
    position->source_range = -1;  // the next epoch's start
  }
  return position;
}

absl::StatusOr<int64_t> TrainingLoop::Resume(DataReader* reader, int epochs,
                                             bool reader_at_position) {
  checkpoint_step_ = layout_->checkpoint_step;
  const std::string inputs = reader != nullptr ? reader->inputs() : "";
  position_.inputs = inputs;
  if (!restored()) return 0;
  if (std::optional<proto::WorkerPosition> p = RestoredPosition(epochs)) position_ = *p;
  position_.state_file.clear();
  position_.state_checksum.clear();
  const std::string recorded = std::exchange(position_.inputs, inputs);
  if (reader == nullptr || position_.finished) return 0;
  proto::WorkerPosition at = position_;
  at.inputs = recorded;
  PS_RETURN_IF_ERROR(CheckResumeInputs(at, inputs, layout_->restored_step));
  if (reader_at_position) return position_.rows;
  return SkipTo(reader, position_.epoch, position_.rows);
}

void TrainingLoop::CountRows(int epoch, int64_t rows, const SourcePosition& end) {
  if (epoch != position_.epoch) {
    position_.epoch = epoch;
    position_.rows = 0;
  }
  position_.rows += rows;
  position_.source_range = end.range;
  position_.source_row_group = end.row_group;
  position_.source_row = end.row;
  position_.source_offset = end.offset;
  position_.source_file = end.file;
}

bool TrainingLoop::Reached(int64_t clock) {
  position_.clock = clock;
  return clock == checkpoint_step_;
}

absl::Status TrainingLoop::Checkpoint(Buffer state, bool log) {
  const int64_t step = position_.clock;
  PS_ASSIGN_OR_RETURN(proto::CheckpointDone done,
                      coordinator_->CheckpointArrive(step, position_, std::move(state)));
  if (log) {
    if (done.path.empty()) {
      spdlog::warn("checkpoint at step {} failed on the coordinator; training goes on", step);
    } else {
      spdlog::info("checkpoint at step {}: {}", step, done.path);
    }
  }
  checkpoint_step_ = done.next_step;
  return absl::OkStatus();
}

absl::Status TrainingLoop::ArriveFinished(int64_t clock) {
  position_.finished = true;
  position_.clock = clock;
  if (checkpoint_step_ < 0 && !restored()) return absl::OkStatus();
  return coordinator_->CheckpointArrive(-1, position_).status();
}

absl::StatusOr<int64_t> TrainingLoop::SkipTo(DataReader* reader, int32_t epoch, int64_t rows) {
  int64_t skipped = 0, in_epoch = 0;
  if (epoch <= 0 && rows <= 0) return skipped;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> b, reader->Next());
    if (!b) break;
    const int e = reader->last_epoch();
    in_epoch = e < epoch ? 0 : in_epoch + b->size;
    skipped += b->size;
    if (e == epoch && in_epoch >= rows) break;
  }
  return skipped;
}

absl::Status TrainingLoop::CheckLoss(double loss_sum, int64_t step) {
  if (std::isfinite(loss_sum)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("loss became non-finite at step ", step, " (learning rate too high?)"));
}

absl::Status CheckResumeInputs(const proto::WorkerPosition& at, const std::string& inputs,
                               int64_t step) {
  // Rows are counted in the shard's order: other files (or the same ones
  // resized) would have the worker skip rows it never trained, or train
  // some twice. A position at an epoch's start skips nothing.
  if (at.finished || at.rows <= 0 || at.inputs.empty() || inputs.empty() || at.inputs == inputs) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", at.rank, " cannot resume its data where the checkpoint of step ", step,
      " left it (epoch ", at.epoch, ", after row ", at.rows,
      " of its shard): the training data changed since. The checkpoint read ", at.inputs,
      "; this run reads ", inputs,
      ". Give the files the checkpoint was taken on (same names, under one folder, same "
      "sizes), or start over with --restore=none (a new job: --new_job)"));
}

}  // namespace pstrain::worker
