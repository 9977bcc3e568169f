#include "server/ps/tables/change_log.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain::server {
namespace {

void SortedInto(const absl::flat_hash_set<uint64_t>& set, std::vector<uint64_t>* out) {
  out->assign(set.begin(), set.end());
  std::sort(out->begin(), out->end());
}

template <class Set>
void Release(Set& set) {
  Set().swap(set);
}

}  // namespace

absl::Status ChangeLog::Cut(uint64_t seq, bool full, uint64_t since) {
  if (full) {
    tracking_ = true;
    tracked_since_ = seq;
    last_cut_ = seq;
    Release(changed_);
    Release(removed_);
    Release(pending_changed_);
    Release(pending_removed_);
    snapshot_changed_.clear();
    snapshot_removed_.clear();
    return absl::OkStatus();
  }
  if (!tracking_ || tracked_since_ > since) {
    return absl::FailedPreconditionError(
        tracking_ ? absl::StrCat("changes are tracked since export ", tracked_since_,
                                 ", not since export ", since, ": a base export is needed")
                  : absl::StrCat("no changes are tracked (no base export since this table was "
                                 "created or restored): a base export is needed"));
  }
  // The window up to `since` is committed: only what came after it stays.
  if (last_cut_ == since) {
    pending_changed_.clear();
    pending_removed_.clear();
  }
  for (uint64_t id : changed_) {
    pending_changed_.insert(id);
    pending_removed_.erase(id);
  }
  for (uint64_t id : removed_) {
    pending_removed_.insert(id);
    pending_changed_.erase(id);
  }
  Release(changed_);
  Release(removed_);
  last_cut_ = seq;
  SortedInto(pending_changed_, &snapshot_changed_);
  SortedInto(pending_removed_, &snapshot_removed_);
  return absl::OkStatus();
}

size_t ChangeLog::bytes() const {
  auto set_bytes = [](const absl::flat_hash_set<uint64_t>& s) {
    return s.capacity() * (sizeof(uint64_t) + 1);
  };
  return set_bytes(changed_) + set_bytes(removed_) + set_bytes(pending_changed_) +
         set_bytes(pending_removed_) +
         (snapshot_changed_.capacity() + snapshot_removed_.capacity()) * sizeof(uint64_t);
}

}  // namespace pstrain::server
