// How the trainer's files (trainer_lead.cc, trainer_best.cc) look at keys of
// the coordinator's store. Internal to the Trainer.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/coordinator_client.h"

namespace pstrain::worker::trainer_store {

// Long waits on the store are cut into looks this long, so that a worker's
// death (or this worker becoming the lead) is noticed within a second.
inline constexpr absl::Duration kPollSlice = absl::Seconds(1);

// A failed look that only means the key is not (yet) there.
inline bool Missing(const absl::Status& st) {
  return st.code() == absl::StatusCode::kNotFound || st.code() == absl::StatusCode::kDeadlineExceeded;
}

// An integer stored under `key`, or `otherwise` when the key is not set;
// DataLoss when it holds no number.
absl::StatusOr<int> StoredInt(CoordinatorClient* coordinator, const std::string& key, int otherwise);

}  // namespace pstrain::worker::trainer_store
