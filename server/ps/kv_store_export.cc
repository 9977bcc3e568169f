// KvStore's and ShardSet's side of versioned exports (--export_dir): change
// log cuts and the pages of a delta.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/ps/kv_store.h"
#include "server/ps/shard_set.h"

namespace pstrain::server {

absl::Status KvStore::CutChanges(uint32_t table, uint64_t seq, bool full, uint64_t since) {
  if (table >= sparse_.size() || !sparse_[table]) {
    return absl::InvalidArgumentError(absl::StrCat("table ", table, " is not a sparse table"));
  }
  return sparse_[table]->changes().Cut(seq, full, since);
}

absl::StatusOr<uint64_t> KvStore::DumpChanges(uint32_t table, uint64_t offset, uint64_t max_rows,
                                              std::vector<uint64_t>* ids,
                                              std::vector<float>* values,
                                              std::vector<uint64_t>* removed) {
  if (table >= sparse_.size() || !sparse_[table]) {
    return absl::InvalidArgumentError(absl::StrCat("table ", table, " is not a sparse table"));
  }
  SparseTable& t = *sparse_[table];
  const std::vector<uint64_t>& changed = t.changes().snapshot_changed();
  const std::vector<uint64_t>& gone = t.changes().snapshot_removed();
  const uint64_t total = changed.size() + gone.size();
  const uint64_t end = std::min<uint64_t>(total, offset + max_rows);
  if (offset < std::min<uint64_t>(end, changed.size())) {
    const uint64_t hi = std::min<uint64_t>(end, changed.size());
    std::span<const uint64_t> page(changed.data() + offset, hi - offset);
    const size_t first = values->size();
    values->resize(first + page.size() * t.dim());
    // Current values: a row evicted since the cut reads as missing, and the
    // next delta removes it.
    PS_RETURN_IF_ERROR(t.Pull(page, values->data() + first));
    ids->insert(ids->end(), page.begin(), page.end());
  }
  for (uint64_t k = std::max<uint64_t>(offset, changed.size()); k < end; ++k) {
    removed->push_back(gone[k - changed.size()]);
  }
  return total;
}

absl::StatusOr<uint64_t> ShardSet::DumpExport(const proto::DumpRequest& request,
                                              std::vector<uint64_t>* ids,
                                              std::vector<float>* values,
                                              std::vector<uint64_t>* removed) {
  const bool full = request.mode == proto::DumpMode::kAll;
  if (!full && request.mode != proto::DumpMode::kChanged) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dump mode ", static_cast<int>(request.mode)));
  }
  absl::StatusOr<uint64_t> total = uint64_t{0};
  Exclusive([&] {
    if (request.offset == 0) {
      for (const auto& part : parts_) {
        absl::Status cut = part->CutChanges(request.table, request.seq, full, request.since);
        if (!cut.ok()) {
          total = cut;
          return;
        }
      }
    }
    uint64_t entries = 0;
    const size_t initial = ids->size() + removed->size();
    for (const auto& part : parts_) {
      const uint64_t taken = ids->size() + removed->size() - initial;
      const uint64_t skip = request.offset > entries ? request.offset - entries : 0;
      const uint64_t want = request.max_rows > taken ? request.max_rows - taken : 0;
      absl::StatusOr<uint64_t> n =
          full ? part->Dump(request.table, skip, want, ids, values)
               : part->DumpChanges(request.table, skip, want, ids, values, removed);
      if (!n.ok()) {
        total = n.status();
        return;
      }
      entries += *n;
    }
    total = entries;
  });
  return total;
}

}  // namespace pstrain::server
