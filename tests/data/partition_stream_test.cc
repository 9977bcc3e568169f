#include "data/partition_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "data/reader.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

// Partition `name` of `dir` with `rows` rows (row r's token "p<tag>r<r>"),
// complete when `done`.
void WritePartition(const std::string& dir, const std::string& name, int rows, bool done = true,
                    int tag = 0) {
  const std::string folder = absl::StrCat(dir, "/", name);
  std::filesystem::create_directories(folder);
  std::string text;
  for (int r = 0; r < rows; ++r) absl::StrAppend(&text, r % 2, "\t", r, "\tp", tag, "r", r, "\n");
  WriteFile(folder + "/part-0.tsv", text);
  WriteFile(folder + "/_meta.json", "not data");  // '_' files are not data
  WriteFile(folder + "/.part-1.tsv.crc", "not data");
  if (done) WriteFile(folder + "/" + kSuccessMarker, "");
}

StreamOptions Options(const std::string& dir) {
  StreamOptions o;
  o.dir = dir;
  o.poll = absl::Milliseconds(20);
  o.idle_timeout = absl::Milliseconds(300);
  return o;
}

// A reader of `dir`'s stream: label, 1 integer, 1 token per row.
ReaderOptions StreamReaderOptions(const std::string& dir, int batch_size) {
  ReaderOptions o;
  o.stream = Options(dir);
  o.schema.num_dense = 1;
  o.schema.num_sparse = 1;
  o.batch_size = batch_size;
  return o;
}

std::vector<std::string> Names(PartitionStream* s) {
  std::atomic<bool> stop{false};
  std::vector<std::string> out;
  while (true) {
    auto p = s->Next(stop);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok() || !p->has_value()) break;
    out.push_back((*p)->name);
  }
  return out;
}

TEST(PartitionStream, TakesCompletePartitionsInNameOrderAtAnyDepth) {
  ScratchDir dir;
  WritePartition(dir.path(), "2026-12-01/13", 3);
  WritePartition(dir.path(), "2026-12-01/02", 3);
  WritePartition(dir.path(), "2026-12-01/14", 3, /*done=*/false);  // not complete
  WritePartition(dir.path(), "2026-11-30/23", 3);
  auto listed = ListCompletePartitions(dir.path());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<std::string>{"2026-11-30/23", "2026-12-01/02", "2026-12-01/13"}));
  auto files = PartitionFiles(dir.path(), "2026-12-01/13");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);  // _meta.json and the dot file are not data
  EXPECT_EQ((*files)[0].path, dir.File("2026-12-01/13/part-0.tsv"));

  PartitionStream s(Options(dir.path()));
  EXPECT_EQ(Names(&s), *listed);
}

TEST(PartitionStream, StartAndEndBoundTheStream) {
  ScratchDir dir;
  for (const char* n : {"a", "b", "c", "d"}) WritePartition(dir.path(), n, 1);
  StreamOptions o = Options(dir.path());
  o.start = "b";
  o.end = "c";
  o.idle_timeout = absl::ZeroDuration();  // the end alone stops it
  PartitionStream s(o);
  EXPECT_EQ(Names(&s), (std::vector<std::string>{"b", "c"}));
  o.end = "bb";  // between partitions: the last one <= end
  PartitionStream t(o);
  EXPECT_EQ(Names(&t), (std::vector<std::string>{"b"}));
}

TEST(PartitionStream, WaitsForThePartitionThatCompletesLater) {
  ScratchDir dir;
  WritePartition(dir.path(), "p0", 1);
  WritePartition(dir.path(), "p1", 1, /*done=*/false);
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(150));
    WriteFile(dir.File("p1/_SUCCESS"), "");
  });
  PartitionStream s(Options(dir.path()));
  EXPECT_EQ(Names(&s), (std::vector<std::string>{"p0", "p1"}));
  writer.join();
}

TEST(PartitionStream, APartitionCompletingBehindThePositionIsSkipped) {
  ScratchDir dir;
  WritePartition(dir.path(), "p0", 1);
  WritePartition(dir.path(), "p2", 1);
  PartitionStream s(Options(dir.path()));
  std::atomic<bool> stop{false};
  EXPECT_EQ((*s.Next(stop))->name, "p0");
  EXPECT_EQ((*s.Next(stop))->name, "p2");
  WritePartition(dir.path(), "p1", 1);  // late, behind p2
  auto next = s.Next(stop);
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(PartitionStream, StopLeavesTheWaitAtOnce) {
  ScratchDir dir;
  StreamOptions o = Options(dir.path());
  o.idle_timeout = absl::ZeroDuration();  // would wait forever
  PartitionStream s(o);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    stop = true;
  });
  const absl::Time t0 = absl::Now();
  auto p = s.Next(stop);
  stopper.join();
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_value());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

TEST(PartitionStream, SkipsFinishedPartitionsAndRefusesMissingOnes) {
  ScratchDir dir;
  for (const char* n : {"a", "b", "c"}) WritePartition(dir.path(), n, 1);
  PartitionStream s(Options(dir.path()));
  ASSERT_TRUE(s.SkipPartitions(2).ok());
  EXPECT_EQ(Names(&s), (std::vector<std::string>{"c"}));
  PartitionStream t(Options(dir.path()));
  absl::Status st = t.SkipPartitions(4);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find(dir.path()), std::string::npos) << st;
}

TEST(PartitionStream, BadOptionsNameTheFlag) {
  ScratchDir dir;
  StreamOptions o = Options(dir.File("missing"));
  EXPECT_NE(ValidateStreamOptions(o).message().find("--train_stream="), std::string::npos);
  o = Options(dir.path());
  o.start = "z";
  o.end = "a";
  EXPECT_NE(ValidateStreamOptions(o).message().find("--stream_start"), std::string::npos);
  o = Options(dir.path());
  o.poll = absl::ZeroDuration();
  EXPECT_FALSE(ValidateStreamOptions(o).ok());
}

// The reader: one epoch per partition, sharded, each row once, names known.
TEST(PartitionStreamReader, ReadsEachPartitionOnceAsOneEpochSplitAmongShards) {
  ScratchDir dir;
  WritePartition(dir.path(), "h00", 40, true, 0);
  WritePartition(dir.path(), "h01", 0, true, 1);  // empty: an epoch without rows
  WritePartition(dir.path(), "h02", 25, false, 2);
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(200));
    WriteFile(dir.File("h02/_SUCCESS"), "");
  });
  std::vector<int64_t> total(3, 0);
  for (int shard = 0; shard < 2; ++shard) {
    ReaderOptions o = StreamReaderOptions(dir.path(), 8);
    o.stream.idle_timeout = absl::Milliseconds(600);
    o.shard_index = shard;
    o.num_shards = 2;
    auto reader = DataReader::Open(o);
    ASSERT_TRUE(reader.ok()) << reader.status();
    while (true) {
      auto b = (*reader)->Next(absl::Seconds(10));
      ASSERT_TRUE(b.ok()) << b.status();
      if (*b == nullptr) break;
    }
    std::vector<int64_t> per_epoch = (*reader)->RowsDeliveredPerEpoch();
    per_epoch.resize(3, 0);
    for (int e = 0; e < 3; ++e) total[e] += per_epoch[e];
    EXPECT_EQ((*reader)->EpochName(0), "h00");
    EXPECT_EQ((*reader)->EpochName(1), "h01");
    EXPECT_EQ((*reader)->EpochName(2), "h02");
    EXPECT_EQ((*reader)->EpochName(3), "");
  }
  writer.join();
  EXPECT_EQ(total, (std::vector<int64_t>{40, 0, 25}));
}

TEST(PartitionStreamReader, AResumedReaderStartsAtItsEpochWithoutReadingTheEarlierOnes) {
  ScratchDir dir;
  WritePartition(dir.path(), "h00", 10, true, 0);
  WritePartition(dir.path(), "h01", 7, true, 1);
  ReaderOptions o = StreamReaderOptions(dir.path(), 100);
  o.first_epoch = 1;
  auto reader = DataReader::Open(o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto b = (*reader)->Next(absl::Seconds(10));
  ASSERT_TRUE(b.ok() && *b != nullptr);
  EXPECT_EQ((*b)->size, 7);
  EXPECT_EQ((*reader)->last_epoch(), 1);
  EXPECT_EQ((*reader)->EpochName(1), "h01");
  EXPECT_EQ((*reader)->stats().rows, 7);  // h00 was not read
}

TEST(PartitionStreamReader, RefusesAStreamWithPatternsOrSeveralEpochs) {
  ScratchDir dir;
  ReaderOptions o = StreamReaderOptions(dir.path(), 1024);
  o.patterns = {dir.File("x.tsv")};
  EXPECT_FALSE(DataReader::Open(o).ok());
  o.patterns.clear();
  o.epochs = 2;
  EXPECT_FALSE(DataReader::Open(o).ok());
}

}  // namespace
}  // namespace pstrain::worker
