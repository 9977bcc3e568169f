// ChangeLog: which rows of a sparse table shard changed, or were removed,
// since an export cut: what a delta export (--export_dir) writes, found
// without scanning the table.
//
// Off, and free, until the first cut: a job that never exports deltas pays
// nothing. A cut belongs to export `seq`:
//   full (a base): the export reads every row; tracking (re)starts at seq.
//   delta since `since` (the latest export the writer committed): the
//     snapshot becomes every row changed or removed after export `since`'s
//     cut. Windows of cuts whose export was never committed (the writer
//     failed, or died) stay in the snapshot until a delta since a later cut
//     arrives, so a failed export loses nothing; a row may be sent twice,
//     which is harmless (the export reads current values).
// A delta cut fails with FailedPrecondition when tracking did not start by
// `since` (this shard was restored, or restarted, after it): a base is then
// needed. A restored table is a new SparseTable, so restores reset it.
//
// Not thread-safe: the table's owner thread calls everything.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace pstrain::server {

class ChangeLog {
 public:
  bool tracking() const { return tracking_; }
  // A push updated (or created) row `id`.
  void Changed(uint64_t id) {
    if (!tracking_) return;
    changed_.insert(id);
    if (!removed_.empty()) removed_.erase(id);
  }
  // Eviction removed row `id` (a row moved to a disk tier is not removed).
  void Removed(uint64_t id) {
    if (!tracking_) return;
    changed_.erase(id);
    removed_.insert(id);
  }

  absl::Status Cut(uint64_t seq, bool full, uint64_t since);

  // The last cut's rows, ascending: changed (live at the cut) and removed.
  const std::vector<uint64_t>& snapshot_changed() const { return snapshot_changed_; }
  const std::vector<uint64_t>& snapshot_removed() const { return snapshot_removed_; }
  size_t snapshot_size() const { return snapshot_changed_.size() + snapshot_removed_.size(); }
  // Bytes of the sets and snapshots.
  size_t bytes() const;

 private:
  bool tracking_ = false;
  uint64_t tracked_since_ = 0;  // the full cut tracking started at
  uint64_t last_cut_ = 0;       // seq of the last cut
  // Since the last cut.
  absl::flat_hash_set<uint64_t> changed_;
  absl::flat_hash_set<uint64_t> removed_;
  // From the last committed cut to the last cut.
  absl::flat_hash_set<uint64_t> pending_changed_;
  absl::flat_hash_set<uint64_t> pending_removed_;
  std::vector<uint64_t> snapshot_changed_;
  std::vector<uint64_t> snapshot_removed_;
};

}  // namespace pstrain::server
