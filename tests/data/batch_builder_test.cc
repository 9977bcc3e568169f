#include "data/batch_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "data/shuffle_buffer.h"

namespace pstrain::worker {
namespace {

// Row r: label r % 2, dense {r, -r}, field 0 one id (100 + r), field 1
// r % 3 + 1 ids (r * 10 + i).
ParsedRow MakeRow(int r) {
  ParsedRow row;
  row.label = static_cast<float>(r % 2);
  row.dense = {static_cast<float>(r), static_cast<float>(-r)};
  row.ids.push_back(100 + r);
  for (int i = 0; i < r % 3 + 1; ++i) row.ids.push_back(r * 10 + i);
  row.field_end = {1, static_cast<uint32_t>(row.ids.size())};
  return row;
}

std::shared_ptr<const Batch> MakeBatch(int begin, int end) {
  BatchBuilder builder(2, 2);
  for (int r = begin; r < end; ++r) EXPECT_TRUE(builder.Append(MakeRow(r)));
  return builder.Finish();
}

TEST(BatchBuilder, BuildsCsrFieldsFromRows) {
  std::shared_ptr<const Batch> b = MakeBatch(0, 4);
  ASSERT_TRUE(ValidateBatch(*b).ok());
  EXPECT_EQ(b->size, 4);
  EXPECT_EQ(b->labels, (std::vector<float>{0, 1, 0, 1}));
  EXPECT_EQ(b->dense, (std::vector<float>{0, 0, 1, -1, 2, -2, 3, -3}));
  EXPECT_EQ(b->ids[0], (std::vector<uint64_t>{100, 101, 102, 103}));
  EXPECT_EQ(b->offsets[0], (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(b->ids[1], (std::vector<uint64_t>{0, 10, 11, 20, 21, 22, 30}));
  EXPECT_EQ(b->offsets[1], (std::vector<uint32_t>{0, 1, 3, 6, 7}));
}

TEST(BatchBuilder, FinishStartsAFreshBatch) {
  BatchBuilder builder(2, 2, 8);
  builder.Append(MakeRow(1));
  std::shared_ptr<const Batch> first = builder.Finish();
  EXPECT_TRUE(builder.empty());
  builder.Append(MakeRow(2));
  std::shared_ptr<const Batch> second = builder.Finish();
  EXPECT_EQ(first->size, 1);
  EXPECT_EQ(second->size, 1);
  EXPECT_EQ(second->ids[0][0], 102u);
  std::shared_ptr<const Batch> empty = builder.Finish();
  EXPECT_EQ(empty->size, 0);
  EXPECT_TRUE(ValidateBatch(*empty).ok());
}

// A batch dropped by its last holder comes back to the builder's pool: the
// next batch reuses its arrays (the same memory), emptied first, and a batch
// still held is never reused; batches may outlive their builder.
TEST(BatchBuilder, DroppedBatchesAreReusedEmptiedAndHeldOnesNever) {
  auto builder = std::make_unique<BatchBuilder>(2, 2, 0, 1);
  const auto fill = [&](int begin, int end) {
    for (int r = begin; r < end; ++r) {
      ParsedRow row = MakeRow(r);
      row.extra_labels = {static_cast<float>(r)};
      EXPECT_TRUE(builder->Append(row));
    }
    return builder->Finish();
  };
  const auto want = [](int begin, int end) {
    BatchBuilder fresh(2, 2, 0, 1);
    for (int r = begin; r < end; ++r) {
      ParsedRow row = MakeRow(r);
      row.extra_labels = {static_cast<float>(r)};
      fresh.Append(row);
    }
    return fresh.Finish();
  };
  std::shared_ptr<const Batch> held = fill(0, 9);
  const Batch* held_address = held.get();
  std::shared_ptr<const Batch> dropped = fill(9, 20);
  const Batch* dropped_address = dropped.get();
  const uint64_t* dropped_ids = dropped->ids[1].data();
  dropped.reset();
  // The batch being built was started before the drop; the one after it
  // reuses the dropped one. Fewer rows than it had: nothing of it may show.
  std::shared_ptr<const Batch> between = fill(20, 21);
  EXPECT_NE(between.get(), dropped_address);
  std::shared_ptr<const Batch> next = fill(21, 24);
  EXPECT_EQ(next.get(), dropped_address) << "the dropped batch is reused";
  EXPECT_EQ(next->ids[1].data(), dropped_ids) << "with its arrays";
  EXPECT_NE(next.get(), held_address);
  EXPECT_TRUE(ValidateBatch(*next).ok()) << ValidateBatch(*next);
  EXPECT_TRUE(BatchesEqual(*next, *want(21, 24)));
  EXPECT_TRUE(BatchesEqual(*between, *want(20, 21)));
  EXPECT_TRUE(BatchesEqual(*held, *want(0, 9))) << "a held batch is untouched";
  // The builder goes first; its batches stay valid, then free their pool.
  builder.reset();
  EXPECT_TRUE(BatchesEqual(*next, *want(21, 24)));
  next.reset();
  held.reset();
}

TEST(BatchBuilder, SliceSplitAndConcatRoundTrip) {
  std::shared_ptr<const Batch> all = MakeBatch(0, 10);
  EXPECT_TRUE(BatchesEqual(SliceBatch(*all, 3, 7), *MakeBatch(3, 7)));
  EXPECT_TRUE(BatchesEqual(SliceBatch(*all, 5, 5), *MakeBatch(5, 5)));
  std::vector<std::shared_ptr<const Batch>> parts = SplitBatch(all, 4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0]->size, 4);
  EXPECT_EQ(parts[2]->size, 2);
  for (const auto& p : parts) EXPECT_TRUE(ValidateBatch(*p).ok());
  absl::StatusOr<std::shared_ptr<const Batch>> joined = ConcatBatches(parts);
  ASSERT_TRUE(joined.ok());
  EXPECT_TRUE(BatchesEqual(**joined, *all));
  EXPECT_EQ(SplitBatch(all, 10)[0].get(), all.get());  // fits: not copied
}

TEST(BatchBuilder, ConcatOfDifferentShapesIsInvalidArgument) {
  BatchBuilder other(1, 0);
  ParsedRow row;
  row.dense = {1};
  other.Append(row);
  EXPECT_EQ(ConcatBatches({MakeBatch(0, 2), other.Finish()}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConcatBatches({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchBuilder, AppendFromCopiesOneRow) {
  std::shared_ptr<const Batch> src = MakeBatch(0, 5);
  BatchBuilder builder(2, 2);
  builder.AppendFrom(*src, 4);
  builder.AppendFrom(*src, 2);
  std::shared_ptr<const Batch> b = builder.Finish();
  BatchBuilder want(2, 2);
  want.Append(MakeRow(4));
  want.Append(MakeRow(2));
  EXPECT_TRUE(BatchesEqual(*b, *want.Finish()));
}

TEST(ValidateBatch, DetectsInconsistentArrays) {
  Batch b = *MakeBatch(0, 3);
  EXPECT_TRUE(ValidateBatch(b).ok());
  Batch bad = b;
  bad.labels.pop_back();
  EXPECT_EQ(ValidateBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b;
  bad.offsets[1][2] = bad.offsets[1][1];  // a row without id
  EXPECT_EQ(ValidateBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b;
  bad.ids[0].push_back(1);
  EXPECT_EQ(ValidateBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b;
  bad.dense.push_back(0);
  EXPECT_EQ(ValidateBatch(bad).code(), absl::StatusCode::kInvalidArgument);
}

// Shuffles rows 0..n-1 through a buffer and returns the field-0 ids out.
std::vector<uint64_t> Shuffle(int n, size_t capacity, uint64_t seed, bool single_hot) {
  ShuffleBuffer buffer(capacity, 2, 2, single_hot);
  buffer.Reseed(seed);
  BatchBuilder out(2, 2);
  for (int r = 0; r < n; ++r) {
    ParsedRow row = MakeRow(r);
    if (single_hot) {
      row.ids.resize(2);
      row.field_end = {1, 2};
    }
    if (buffer.full()) {
      EXPECT_TRUE(buffer.PopRandomInto(&out));
    }
    buffer.Insert(row);
  }
  while (!buffer.empty()) EXPECT_TRUE(buffer.PopRandomInto(&out));
  std::shared_ptr<const Batch> b = out.Finish();
  EXPECT_TRUE(ValidateBatch(*b).ok());
  // Every row keeps its own values together.
  for (int i = 0; i < b->size; ++i) {
    int r = static_cast<int>(b->ids[0][i] - 100);
    EXPECT_EQ(b->dense[2 * i], static_cast<float>(r));
    EXPECT_EQ(b->labels[i], static_cast<float>(r % 2));
    uint32_t count = b->offsets[1][i + 1] - b->offsets[1][i];
    EXPECT_EQ(count, single_hot ? 1u : static_cast<uint32_t>(r % 3 + 1));
    EXPECT_EQ(b->ids[1][b->offsets[1][i]], static_cast<uint64_t>(r * 10));
  }
  return b->ids[0];
}

TEST(ShuffleBuffer, OutputIsADeterministicPermutationForASeed) {
  for (bool single_hot : {true, false}) {
    std::vector<uint64_t> a = Shuffle(500, 64, 7, single_hot);
    std::vector<uint64_t> b = Shuffle(500, 64, 7, single_hot);
    std::vector<uint64_t> c = Shuffle(500, 64, 8, single_hot);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    std::vector<uint64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted.size(), 500u);
    for (int r = 0; r < 500; ++r) EXPECT_EQ(sorted[r], static_cast<uint64_t>(100 + r));
  }
}

TEST(ShuffleBuffer, RowsMoveFartherThanTheWindowOnlyRarely) {
  std::vector<uint64_t> out = Shuffle(2000, 100, 3, true);
  int displaced = 0;
  for (size_t i = 0; i < out.size(); ++i) displaced += out[i] != 100 + i;
  EXPECT_GT(displaced, 1800);  // actually shuffled
  // A row cannot come out before it went in: position >= r - capacity.
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_LE(static_cast<int64_t>(out[i] - 100), static_cast<int64_t>(i) + 100);
  }
}

}  // namespace
}  // namespace pstrain::worker
