#include "server/ps/consistency_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain::server {

std::unique_ptr<ConsistencyPolicy> ConsistencyPolicy::Create(const proto::TableLayout& layout) {
  const int32_t workers = std::max(layout.num_workers, 1);
  switch (layout.consistency) {
    case proto::Consistency::kBsp:
      return std::make_unique<BspPolicy>(workers);
    case proto::Consistency::kSsp:
      return std::make_unique<SspPolicy>(workers, layout.staleness);
    case proto::Consistency::kAsp:
      break;
  }
  return std::make_unique<AspPolicy>(workers);
}

ConsistencyPolicy::ConsistencyPolicy(int32_t num_workers)
    : clocks_(num_workers, 0), retired_(num_workers, false) {}

int64_t ConsistencyPolicy::ServerStep() const {
  int64_t step = applied_;
  for (int64_t c : clocks_) step = std::max(step, c);
  return step;
}

void ConsistencyPolicy::Restore(const std::vector<proto::WorkerPosition>& positions,
                                int64_t restored_step) {
  for (const proto::WorkerPosition& p : positions) {
    if (!is_worker(p.rank)) continue;
    clocks_[p.rank] = p.clock;
    retired_[p.rank] = p.finished;
  }
  applied_ = std::max<int64_t>(0, restored_step);
}

int64_t ConsistencyPolicy::SlowestActiveClock() const {
  int64_t slowest = INT64_MAX;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (!retired_[w]) slowest = std::min(slowest, clocks_[w]);
  }
  return slowest;
}

void ConsistencyPolicy::OnAppliedPush(const Push& push) {
  if (push.has_parts || !push.retire) {
    clocks_[push.worker] = std::max(clocks_[push.worker], push.clock + 1);
  }
  if (push.retire) retired_[push.worker] = true;
}

int64_t ConsistencyPolicy::ProposeSlowestClock() const {
  int64_t slowest = SlowestActiveClock();
  if (slowest == INT64_MAX) {  // nobody else trains: any clock will do
    slowest = 0;
    for (int64_t c : clocks_) slowest = std::max(slowest, c);
  }
  return slowest;
}

void ConsistencyPolicy::ReadmitAtSlowestClock(int32_t w, int64_t step) {
  // Never below the slowest active clock: no other worker waits for the
  // newcomer to catch up.
  const int64_t slowest = SlowestActiveClock();
  clocks_[w] = slowest == INT64_MAX ? step : std::max(step, slowest);
  retired_[w] = false;
}

bool AspPolicy::OnPush(const Push& push) {
  OnAppliedPush(push);
  return push.retire;
}

absl::Status AspPolicy::CommitReadmission(int32_t w, int64_t step, uint64_t /*epoch*/) {
  ReadmitAtSlowestClock(w, step);
  return absl::OkStatus();
}

bool SspPolicy::OnPush(const Push& push) {
  OnAppliedPush(push);
  return true;  // the slowest clock may have moved
}

absl::Status SspPolicy::CommitReadmission(int32_t w, int64_t step, uint64_t /*epoch*/) {
  ReadmitAtSlowestClock(w, step);
  return absl::OkStatus();
}

absl::Status BspPolicy::CheckPush(const Push& push) const {
  const int64_t pushed = clocks_[push.worker];
  if (Counts(push) && (push.clock != applied_ || pushed != push.clock)) {
    return absl::FailedPreconditionError(
        absl::StrCat("BSP push from worker ", push.worker, " for step ", push.clock, " while step ",
                     applied_, " is open and it has pushed ", pushed, " times"));
  }
  return absl::OkStatus();
}

bool BspPolicy::OnPush(const Push& push) {
  if (Counts(push)) {
    clocks_[push.worker] = push.clock + 1;
    ++pushers_;
  }
  if (push.retire) retired_[push.worker] = true;
  return push.retire;
}

std::optional<int64_t> BspPolicy::CompleteStep(uint64_t epoch) {
  bool held = false;
  for (auto it = readmissions_.begin(); it != readmissions_.end();) {
    if (it->second.epoch != epoch) {  // the cluster rolled back: clocks were reset
      it = readmissions_.erase(it);
      continue;
    }
    if (applied_ >= it->second.hold) held = true;
    ++it;
  }
  if (held || pushers_ == 0) return std::nullopt;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (!retired_[w] && clocks_[w] <= applied_) return std::nullopt;  // still owes this step
  }
  pushers_ = 0;
  return applied_++;
}

int64_t BspPolicy::PrepareReadmission(int32_t w, uint64_t epoch) {
  // A step somebody pushed may still complete without it; none after.
  const int64_t proposal = pushers_ == 0 ? applied_ : applied_ + 1;
  readmissions_[w] = Readmission{proposal, epoch};
  return proposal;
}

absl::Status BspPolicy::CommitReadmission(int32_t w, int64_t step, uint64_t epoch) {
  auto it = readmissions_.find(w);
  if (it == readmissions_.end() || it->second.epoch != epoch || step < applied_) {
    // Without the hold this server may have passed the step: refuse rather
    // than wait for a push that can never be accepted.
    readmissions_.erase(w);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot take worker ", w, " back at step ", step,
                     ": not prepared (or rolled back since) at step ", applied_));
  }
  readmissions_.erase(it);
  clocks_[w] = step;  // steps before it do not wait for it; its first push is for it
  retired_[w] = false;
  return absl::OkStatus();
}

}  // namespace pstrain::server
