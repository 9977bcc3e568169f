// ChangeLog (the rows a delta export writes) and what marks it: pushes,
// eviction, and a disk tier's moves, which remove nothing.
#include "server/ps/tables/change_log.h"

#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <unistd.h>

#include "gtest/gtest.h"
#include "server/ps/tables/disk_tier.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {
namespace {

using Ids = std::vector<uint64_t>;

TEST(ChangeLog, IsOffUntilABaseAndADeltaBeforeOneNeedsABase) {
  ChangeLog log;
  log.Changed(1);
  EXPECT_FALSE(log.tracking());
  absl::Status delta = log.Cut(1, /*full=*/false, 0);
  EXPECT_EQ(delta.code(), absl::StatusCode::kFailedPrecondition) << delta;
  EXPECT_NE(delta.message().find("base export is needed"), std::string::npos) << delta;
  ASSERT_TRUE(log.Cut(2, /*full=*/true, 0).ok());
  EXPECT_TRUE(log.tracking());
  EXPECT_EQ(log.snapshot_size(), 0u);
  // Since an export before tracking started: the rows between are unknown.
  EXPECT_EQ(log.Cut(3, false, 1).code(), absl::StatusCode::kFailedPrecondition);
  // The change before the base is not in the delta after it.
  ASSERT_TRUE(log.Cut(4, false, 2).ok());
  EXPECT_EQ(log.snapshot_changed(), Ids{});
}

TEST(ChangeLog, ADeltaHoldsEveryRowChangedOrRemovedSinceTheCommittedExport) {
  ChangeLog log;
  ASSERT_TRUE(log.Cut(1, true, 0).ok());
  for (uint64_t id : {9, 5, 3, 5, 7}) log.Changed(id);
  log.Removed(7);  // changed, then evicted: removed only
  log.Removed(11);
  log.Changed(11);  // evicted, then created again: changed only
  ASSERT_TRUE(log.Cut(2, false, 1).ok());
  EXPECT_EQ(log.snapshot_changed(), (Ids{3, 5, 9, 11}));
  EXPECT_EQ(log.snapshot_removed(), (Ids{7}));
  EXPECT_EQ(log.snapshot_size(), 5u);
  // Export 2 committed: the next delta holds only what came after its cut.
  log.Changed(3);
  log.Removed(5);
  ASSERT_TRUE(log.Cut(3, false, 2).ok());
  EXPECT_EQ(log.snapshot_changed(), (Ids{3}));
  EXPECT_EQ(log.snapshot_removed(), (Ids{5}));
}

TEST(ChangeLog, AnExportThatWasNeverCommittedLosesNothing) {
  ChangeLog log;
  ASSERT_TRUE(log.Cut(1, true, 0).ok());
  log.Changed(4);
  log.Removed(8);
  ASSERT_TRUE(log.Cut(2, false, 1).ok());  // the writer of export 2 fails
  log.Changed(6);
  log.Changed(8);
  // Export 3 is again a delta since export 1: it holds export 2's rows too,
  // with 8 changed (its removal was overtaken).
  ASSERT_TRUE(log.Cut(3, false, 1).ok());
  EXPECT_EQ(log.snapshot_changed(), (Ids{4, 6, 8}));
  EXPECT_EQ(log.snapshot_removed(), Ids{});
  // Export 3 committed.
  log.Removed(4);
  ASSERT_TRUE(log.Cut(4, false, 3).ok());
  EXPECT_EQ(log.snapshot_changed(), Ids{});
  EXPECT_EQ(log.snapshot_removed(), (Ids{4}));
  // A base starts over.
  log.Changed(1);
  ASSERT_TRUE(log.Cut(5, true, 0).ok());
  EXPECT_EQ(log.snapshot_size(), 0u);
  ASSERT_TRUE(log.Cut(6, false, 5).ok());
  EXPECT_EQ(log.snapshot_size(), 0u);
  EXPECT_GT(log.bytes(), 0u);
}

TableSpec Spec(uint64_t ttl_steps) {
  TableSpec spec;
  spec.id = 0;
  spec.name = "emb";
  spec.kind = TableKind::kSparse;
  spec.dim = 4;
  spec.optimizer.kind = OptimizerKind::kAdagrad;
  spec.optimizer.lr = 0.1f;
  spec.init = {InitKind::kUniform, 0.05f, 7};
  spec.eviction.ttl_steps = ttl_steps;
  return spec;
}

void Push(SparseTable& t, const Ids& ids, int64_t step) {
  std::vector<float> grads(ids.size() * t.dim(), 0.25f);
  absl::Status st = t.Push(ids, grads.data(), 1.0f, 1.0f, step);
  ASSERT_TRUE(st.ok()) << st;
}

TEST(ChangeLogOfATable, PushesAreChangesAndTtlEvictionsAreRemovals) {
  auto made = SparseTable::Create(Spec(/*ttl_steps=*/20));
  ASSERT_TRUE(made.ok()) << made.status();
  SparseTable& t = **made;
  Push(t, {1, 2, 3}, 0);
  // No export yet: nothing is tracked.
  EXPECT_FALSE(t.changes().tracking());
  ASSERT_TRUE(t.changes().Cut(1, true, 0).ok());
  Push(t, {2}, 1);
  // 1 and 3 expire (not updated for 20 steps), 2 stays updated.
  for (int64_t step = 2; step < 200; ++step) {
    Ids ids = {1000 + static_cast<uint64_t>(step)};
    if (step % 10 == 0) ids.push_back(2);
    Push(t, ids, step);
  }
  ASSERT_FALSE(t.Contains(1));
  ASSERT_TRUE(t.Contains(2));
  ASSERT_TRUE(t.changes().Cut(2, false, 1).ok());
  const Ids& changed = t.changes().snapshot_changed();
  const Ids& removed = t.changes().snapshot_removed();
  // Every live row is in the delta (each was pushed after the base); every
  // expired one pushed after the base, and 1 and 3, are removed.
  std::set<uint64_t> live;
  ASSERT_TRUE(t.ForEachRow([&](const SparseRow& r) { live.insert(r.id); }).ok());
  EXPECT_EQ(std::set<uint64_t>(changed.begin(), changed.end()), live);
  std::set<uint64_t> gone(removed.begin(), removed.end());
  EXPECT_TRUE(gone.count(1) && gone.count(3));
  EXPECT_FALSE(gone.count(2));
  EXPECT_EQ(changed.size() + removed.size(), 198u + 3u);  // 1002..1199, and 1, 2, 3
  for (uint64_t id : removed) EXPECT_FALSE(t.Contains(id)) << id;
}

TEST(ChangeLogOfATable, RowsMovedToTheDiskTierAreNotRemoved) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("pstrain-changelog-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto tier = DiskTier::Open(dir.string(), TierStore::kSlots);
  ASSERT_TRUE(tier.ok()) << tier.status();
  SparseTable::Options o;
  o.tier = tier->get();
  o.ram_capacity = 64;
  auto made = SparseTable::Create(Spec(0), o);
  ASSERT_TRUE(made.ok()) << made.status();
  SparseTable& t = **made;
  ASSERT_TRUE(t.changes().Cut(1, true, 0).ok());
  Ids ids;
  for (uint64_t id = 0; id < 1000; ++id) ids.push_back(id * 7);
  for (size_t at = 0; at < ids.size(); at += 50) {
    Push(t, Ids(ids.begin() + at, ids.begin() + at + 50), static_cast<int64_t>(at));
  }
  EXPECT_LE(t.ram_rows(), 64u);
  EXPECT_EQ(t.size(), 1000u);
  ASSERT_TRUE(t.changes().Cut(2, false, 1).ok());
  EXPECT_EQ(t.changes().snapshot_changed(), ids);
  EXPECT_EQ(t.changes().snapshot_removed(), Ids{});
  made->reset();
  tier->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::server
