// PipelineTrainer's part of checkpoints and of resuming from one (after a
// rollback of the cluster, or --restore): the pause at a checkpoint step,
// the position each stage reports, and the step and data position a stage
// resumes at.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/pipeline/pipeline_trainer.h"

namespace pstrain::worker {
namespace {

// WaitForKey looks at the store in slices this long, so that a rollback of
// the cluster (interrupted_) ends the wait within a second.
constexpr absl::Duration kStorePollSlice = absl::Seconds(1);

// Reads `reader` past `rows` rows of data epoch `epoch` (whole batches, as
// Trainer does), so that the resumed run sees the data an unbroken one
// would. Returns the rows skipped.
absl::StatusOr<int64_t> SkipPast(DataReader* reader, int32_t epoch, int64_t rows) {
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

}  // namespace

absl::StatusOr<int64_t> PipelineTrainer::Resume(DataReader* reader) {
  const proto::TableLayout& layout = kv_->layout();
  checkpoint_step_ = layout.checkpoint_step;
  position_ = proto::WorkerPosition();
  position_.rank = rank_;
  if (layout.restored_step < 0) return 0;
  for (const proto::WorkerPosition& p : layout.positions) {
    if (p.rank == rank_) position_ = p;
  }
  position_.rank = rank_;
  position_.state_file.clear();
  position_.state_checksum.clear();
  int64_t skipped = 0;
  if (reader != nullptr && !position_.finished) {
    PS_ASSIGN_OR_RETURN(skipped, SkipPast(reader, position_.epoch, position_.rows));
  }
  spdlog::info("stage {} of replica {}: resuming at step {} (data epoch {}, {} rows skipped)",
               place_.stage, place_.replica, position_.clock, position_.epoch, skipped);
  return position_.clock;
}

absl::Status PipelineTrainer::CheckpointIfDue(int64_t clock, int data_epoch, int64_t rows) {
  if (runner_->first()) {
    if (data_epoch != position_.epoch) {
      position_.epoch = data_epoch;
      position_.rows = 0;
    }
    position_.rows += rows;
  }
  position_.clock = clock;
  if (clock != checkpoint_step_) return absl::OkStatus();
  // The checkpoint is a consistent cut: this stage's gradients of every
  // step before it must be on the servers.
  if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
  PS_ASSIGN_OR_RETURN(proto::CheckpointDone done, coordinator_->CheckpointArrive(clock, position_));
  if (rank_ == 0) {
    if (done.path.empty()) {
      spdlog::warn("checkpoint at step {} failed on the coordinator; training goes on", clock);
    } else {
      spdlog::info("checkpoint at step {}: {}", clock, done.path);
    }
  }
  checkpoint_step_ = done.next_step;
  return absl::OkStatus();
}

absl::Status PipelineTrainer::ArriveFinished(int64_t clock) {
  if (checkpoint_step_ < 0 && kv_->layout().restored_step < 0) return absl::OkStatus();
  position_.finished = true;
  position_.clock = clock;
  return coordinator_->CheckpointArrive(-1, position_).status();
}

std::string PipelineTrainer::Key(const std::string& rest) const {
  // Keys of an epoch after a rollback never meet those written before it.
  const uint64_t epoch = kv_->layout().epoch;
  return epoch == 0 ? absl::StrCat("pipeline/", rest)
                    : absl::StrCat("pipeline/epoch", epoch, "/", rest);
}

absl::StatusOr<Buffer> PipelineTrainer::WaitForKey(const std::string& key, absl::Duration timeout) {
  const absl::Time start = absl::Now(), until = start + timeout;
  absl::Duration log_after = absl::Seconds(5);
  while (true) {
    if (absl::Now() - start >= log_after) {
      spdlog::info("waiting for store key {} ({:.0f} s so far): another stage or replica has not "
                   "stored it yet",
                   key, absl::ToDoubleSeconds(absl::Now() - start));
      log_after = std::min(log_after * 2, log_after + absl::Minutes(1));
    }
    const absl::Duration slice =
        std::min(kStorePollSlice, std::max(absl::ZeroDuration(), until - absl::Now()));
    auto b = coordinator_->StoreGet(key, slice);
    if (b.ok()) return b;
    if (b.status().code() != absl::StatusCode::kDeadlineExceeded &&
        b.status().code() != absl::StatusCode::kNotFound) {
      return b.status();
    }
    if (interrupted_ && interrupted_()) {
      return absl::AbortedError(absl::StrCat("the cluster is rolling back; stopped waiting for ", key));
    }
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(absl::StrCat("no store key ", key, " within ",
                                                      absl::FormatDuration(timeout),
                                                      " (is the stage that stores it alive?)"));
    }
  }
}

}  // namespace pstrain::worker
