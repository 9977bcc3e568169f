// PipelineTrainer's part of checkpoints and of resuming from one (after a
// rollback of the cluster, or --restore), on top of the TrainingLoop's
// (worker/training_loop.h) that the Trainer shares: what a stage's position
// counts (stage 0: its data), when it pauses, what it logs; and the
// coordinator's store keys the stages meet at.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/pipeline/pipeline_trainer.h"
#include "worker/wait_log.h"

namespace pstrain::worker {
namespace {

// WaitForKey looks at the store in slices this long, so that a rollback of
// the cluster (interrupted_) ends the wait within a second.
constexpr absl::Duration kStorePollSlice = absl::Seconds(1);

}  // namespace

absl::StatusOr<int64_t> PipelineTrainer::Resume(DataReader* reader) {
  // Stage 0's reader is read past the batches trained before (as Trainer's).
  PS_ASSIGN_OR_RETURN(int64_t skipped, loop_.Resume(reader, /*epochs=*/0));
  if (!loop_.restored()) return 0;
  const proto::WorkerPosition& at = loop_.position();
  spdlog::info("stage {} of replica {}: resuming at step {} (data epoch {}, {} rows skipped)",
               place_.stage, place_.replica, at.clock, at.epoch, skipped);
  return at.clock;
}

absl::Status PipelineTrainer::CheckpointIfDue(int64_t clock, int data_epoch, int64_t rows) {
  if (runner_->first()) loop_.CountRows(data_epoch, rows);
  if (!loop_.Reached(clock)) return absl::OkStatus();
  // The checkpoint is a consistent cut: this stage's gradients of every
  // step before it must be on the servers.
  if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
  return loop_.Checkpoint(Buffer(), /*log=*/rank_ == 0);
}

std::string PipelineTrainer::Key(const std::string& rest) const {
  // Keys of an epoch after a rollback never meet those written before it.
  const uint64_t epoch = kv_->layout().epoch;
  return epoch == 0 ? absl::StrCat("pipeline/", rest)
                    : absl::StrCat("pipeline/epoch", epoch, "/", rest);
}

absl::StatusOr<Buffer> PipelineTrainer::WaitForKey(const std::string& key, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  WaitLog log;
  while (true) {
    if (log.Due()) {
      spdlog::info("waiting for store key {} ({:.0f} s so far): another stage or replica has not "
                   "stored it yet",
                   key, log.seconds());
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
