// How the trainer's files (trainer_lead.cc, trainer_best.cc) look at keys of
// the coordinator's store. Internal to the Trainer.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pstrain::worker::trainer_store {

// Long waits on the store are cut into looks this long, so that a worker's
// death (or this worker becoming the lead) is noticed within a second.
inline constexpr absl::Duration kPollSlice = absl::Seconds(1);

// A failed look that only means the key is not (yet) there.
inline bool Missing(const absl::Status& st) {
  return st.code() == absl::StatusCode::kNotFound || st.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace pstrain::worker::trainer_store
