#include "data/reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/batch_builder.h"
#include "data/compress_file.h"
#include "data/file_set.h"
#include "data/parquet/parquet_file.h"
#include "data/parser.h"
#include "data/schema_file.h"
#include "data/shard_scanner.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

// A small schema: label, 2 integers, 2 tokens. Row r's first token is
// "r<r>", so FeatureId(0, "r<r>") identifies it.
Schema SmallSchema() {
  Schema s;
  s.num_dense = 2;
  s.num_sparse = 2;
  s.max_line_bytes = 256;
  return s;
}

std::string RowLine(int r) {
  return absl::StrCat(r % 3 == 0 ? 1 : 0, "\t", r, "\t", r % 7 == 0 ? "" : "-2", "\tr", r,
                      "\t", r % 5 == 0 ? "" : absl::StrCat("t", r % 11), "\n");
}

uint64_t RowId(int r) { return FeatureId(0, absl::StrCat("r", r), 0); }

// Writes rows [begin, end) to `path`, optionally without the final '\n'.
void WriteRows(const std::string& path, int begin, int end, bool final_newline = true) {
  std::string s;
  for (int r = begin; r < end; ++r) s += RowLine(r);
  if (!final_newline && !s.empty()) s.pop_back();
  WriteFile(path, s);
}

ReaderOptions SmallOptions(const std::string& pattern) {
  ReaderOptions o;
  o.patterns = {pattern};
  o.schema = SmallSchema();
  o.batch_size = 16;
  o.io_buffer_bytes = 4096;
  return o;
}

// Drains a reader; returns the row ids in order. Fails the test on error.
std::vector<uint64_t> Drain(DataReader* reader, std::vector<int>* batch_sizes = nullptr) {
  std::vector<uint64_t> ids;
  while (true) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = reader->Next();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok() || *b == nullptr) break;
    EXPECT_TRUE(ValidateBatch(**b).ok());
    if (batch_sizes != nullptr) batch_sizes->push_back((*b)->size);
    ids.insert(ids.end(), (*b)->ids[0].begin(), (*b)->ids[0].end());
  }
  return ids;
}

std::vector<uint64_t> Ids(int begin, int end) {
  std::vector<uint64_t> ids;
  for (int r = begin; r < end; ++r) ids.push_back(RowId(r));
  return ids;
}

TEST(DataReader, ReadsEveryRowInFileOrderInFullBatches) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 50);
  auto reader = *DataReader::Open(SmallOptions(dir.File("a.tsv")));
  std::vector<int> sizes;
  EXPECT_EQ(Drain(reader.get(), &sizes), Ids(0, 50));
  EXPECT_EQ(sizes, (std::vector<int>{16, 16, 16, 2}));
  // The end is sticky.
  EXPECT_EQ(*reader->Next(), nullptr);
  ReaderStats stats = reader->stats();
  EXPECT_EQ(stats.rows, 50);
  EXPECT_EQ(stats.rows_delivered, 50);
  EXPECT_EQ(stats.batches_delivered, 4);
  EXPECT_EQ(stats.bad_lines, 0);
  EXPECT_EQ(stats.bytes_read, static_cast<int64_t>(testing_util::ReadFile(dir.File("a.tsv")).size()));
  EXPECT_TRUE(stats.finished);
}

TEST(DataReader, ParsesValuesLikeTheParser) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 30);
  absl::StatusOr<std::shared_ptr<const Batch>> all = ReadAll(SmallOptions(dir.File("a.tsv")));
  ASSERT_TRUE(all.ok()) << all.status();
  std::unique_ptr<const Parser> parser = *CreateParser(SmallSchema());
  BatchBuilder want(2, 2);
  ParsedRow row;
  for (int r = 0; r < 30; ++r) {
    std::string line = RowLine(r);
    line.pop_back();
    ASSERT_TRUE(parser->Parse(line, &row).ok());
    want.Append(row);
  }
  EXPECT_TRUE(BatchesEqual(**all, *want.Finish()));
}

TEST(DataReader, DropRemainderDropsTheLastSmallBatchOfEachEpoch) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 40);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.drop_remainder = true;
  o.epochs = 2;
  auto reader = *DataReader::Open(o);
  std::vector<int> sizes;
  Drain(reader.get(), &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{16, 16, 16, 16}));
  EXPECT_EQ(reader->RowsDeliveredPerEpoch(), (std::vector<int64_t>{32, 32}));
}

TEST(DataReader, EpochsRepeatTheDataAndCountRowsPerEpoch) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 20);
  WriteRows(dir.File("b.tsv"), 20, 37, /*final_newline=*/false);
  ReaderOptions o = SmallOptions(dir.File("*.tsv"));
  o.epochs = 3;
  auto reader = *DataReader::Open(o);
  std::vector<uint64_t> want = Ids(0, 37);
  std::vector<uint64_t> got = Drain(reader.get());
  ASSERT_EQ(got.size(), 3 * want.size());
  for (int e = 0; e < 3; ++e) {
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + e * want.size()));
  }
  EXPECT_EQ(reader->RowsDeliveredPerEpoch(), (std::vector<int64_t>{37, 37, 37}));
  EXPECT_EQ(reader->last_epoch(), 2);
  EXPECT_EQ(reader->files().size(), 2u);
}

TEST(DataReader, ShardsOfTheSameFilesTogetherDeliverEveryRowOnce) {
  ScratchDir dir;
  // Odd sizes, a final line without '\n', an empty file.
  WriteRows(dir.File("p0.tsv"), 0, 123);
  WriteRows(dir.File("p1.tsv"), 123, 124, false);
  WriteFile(dir.File("p2.tsv"), "");
  WriteRows(dir.File("p3.tsv"), 124, 301, false);
  for (int n = 1; n <= 5; ++n) {
    std::vector<uint64_t> all;
    int64_t delivered = 0;
    for (int shard = 0; shard < n; ++shard) {
      ReaderOptions o = SmallOptions(dir.File("p*.tsv"));
      o.shard_index = shard;
      o.num_shards = n;
      o.batch_size = 7;
      auto reader = *DataReader::Open(o);
      std::vector<uint64_t> part = Drain(reader.get());
      EXPECT_EQ(reader->RowsDeliveredPerEpoch(),
                std::vector<int64_t>{static_cast<int64_t>(part.size())});
      delivered += static_cast<int64_t>(part.size());
      all.insert(all.end(), part.begin(), part.end());
    }
    EXPECT_EQ(delivered, 301) << "n=" << n;
    EXPECT_EQ(all, Ids(0, 301)) << "n=" << n;
  }
}

TEST(DataReader, ShuffleIsDeterministicPerSeedAndAPermutationPerEpoch) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 300);
  auto run = [&](uint64_t seed) {
    ReaderOptions o = SmallOptions(dir.File("a.tsv"));
    o.shuffle_buffer_rows = 64;
    o.seed = seed;
    o.epochs = 2;
    auto reader = *DataReader::Open(o);
    return Drain(reader.get());
  };
  std::vector<uint64_t> a = run(11), b = run(11), c = run(12);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 600u);
  std::vector<uint64_t> e0(a.begin(), a.begin() + 300), e1(a.begin() + 300, a.end());
  EXPECT_NE(e0, e1);             // each epoch has its own order
  EXPECT_NE(e0, Ids(0, 300));    // shuffled
  std::vector<uint64_t> want = Ids(0, 300);
  std::sort(want.begin(), want.end());
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, want);  // batches never mix epochs
  EXPECT_EQ(e1, want);
}

TEST(DataReader, BadLinesBelowTheLimitAreSkippedAndCounted) {
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 2000; ++r) s += r % 250 == 17 ? "garbage line\n" : RowLine(r);
  WriteFile(dir.File("a.tsv"), s);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  auto reader = *DataReader::Open(o);
  std::vector<uint64_t> ids = Drain(reader.get());
  EXPECT_EQ(ids.size(), 1992u);
  EXPECT_EQ(reader->stats().bad_lines, 8);
  EXPECT_EQ(reader->stats().rows, 1992);
}

TEST(DataReader, TooManyBadLinesIsInvalidArgumentNamingTheFile) {
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 3000; ++r) s += r % 50 == 3 ? "1\tx\t\ta\tb\n" : RowLine(r);  // 2% bad
  WriteFile(dir.File("bad.tsv"), s);
  auto reader = *DataReader::Open(SmallOptions(dir.File("bad.tsv")));
  absl::Status error;
  while (true) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = reader->Next();
    if (!b.ok()) {
      error = b.status();
      break;
    }
    ASSERT_NE(*b, nullptr) << "reader ended without an error";
  }
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(error.message().find("bad.tsv"), std::string::npos) << error;
  EXPECT_NE(error.message().find("too many bad lines"), std::string::npos) << error;
  // Sticky.
  EXPECT_EQ(reader->Next().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DataReader, BadFractionIsCheckedAtTheEndOfSmallFiles) {
  ScratchDir dir;
  WriteFile(dir.File("small.tsv"), RowLine(0) + "oops\n" + RowLine(1) + RowLine(2));
  absl::StatusOr<std::shared_ptr<const Batch>> all = ReadAll(SmallOptions(dir.File("small.tsv")));
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  // The message gives file and line of the bad line.
  EXPECT_NE(all.status().message().find("small.tsv:2"), std::string::npos) << all.status();
  ReaderOptions lenient = SmallOptions(dir.File("small.tsv"));
  lenient.max_bad_lines_fraction = 0.5;
  all = ReadAll(lenient);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)->size, 3);
}

TEST(DataReader, OverlongLinesAreBadLines) {
  ScratchDir dir;
  WriteFile(dir.File("a.tsv"),
            RowLine(0) + "1\t1\t1\t" + std::string(1000, 'z') + "\tq\n" + RowLine(1));
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.max_bad_lines_fraction = 0.5;
  auto reader = *DataReader::Open(o);
  EXPECT_EQ(Drain(reader.get()), Ids(0, 2));
  EXPECT_EQ(reader->stats().bad_lines, 1);
}

TEST(DataReader, OpenRejectsBadOptionsAndMissingFiles) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 3);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.shard_index = 2;
  o.num_shards = 2;
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions(dir.File("a.tsv"));
  o.batch_size = 0;
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions(dir.File("a.tsv"));
  o.max_bad_lines_fraction = 2;
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions(dir.File("a.tsv"));
  o.schema.multi_hot_sep = '\t';
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataReader::Open(SmallOptions(dir.File("nope*.tsv"))).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DataReader, DestructorStopsAnUnfinishedReaderPromptly) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 5000);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.epochs = 0;  // forever
  o.prefetch_batches = 1;
  o.batch_size = 4;
  auto start = std::chrono::steady_clock::now();
  {
    auto reader = *DataReader::Open(o);
    for (int i = 0; i < 3; ++i) ASSERT_NE(*reader->Next(), nullptr);
  }
  // No timing assertion (shared CPUs); returning at all is the check.
  std::printf("[ reader   ] destroyed after %.3f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST(DataReader, InfiniteEpochsOnAnEmptyShardEnd) {
  ScratchDir dir;
  WriteFile(dir.File("empty.tsv"), "");
  ReaderOptions o = SmallOptions(dir.File("empty.tsv"));
  o.epochs = 0;
  auto reader = *DataReader::Open(o);
  EXPECT_EQ(*reader->Next(), nullptr);
}

TEST(DataReader, NextWithTimeoutReturnsABatchOrDeadlineExceeded) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 10);
  auto reader = *DataReader::Open(SmallOptions(dir.File("a.tsv")));
  absl::StatusOr<std::shared_ptr<const Batch>> b = reader->Next(absl::ZeroDuration());
  if (!b.ok()) {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(Drain(reader.get()).size(), b.ok() && *b != nullptr ? 0u : 10u);
}

TEST(DataReader, RandomBytesGiveBadLinesNeverACrash) {
  ScratchDir dir;
  std::mt19937 rng(17);
  const std::string alphabet = std::string("0123456789abc-\t\t\t\t\n\r") + '\0' + "\xff";
  std::string s;
  for (int i = 0; i < 20000; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
  s.push_back('\n');
  for (int r = 0; r < 50; ++r) s += RowLine(r);
  WriteFile(dir.File("noise.tsv"), s);
  int64_t lines = 0;
  {
    std::vector<std::string> parts = absl::StrSplit(s, '\n');
    for (size_t i = 0; i < parts.size(); ++i) {
      bool last = i + 1 == parts.size();
      if (last && parts[i].empty()) continue;
      lines += !(parts[i].empty() || parts[i] == "\r");
    }
  }
  for (int n = 1; n <= 3; ++n) {
    int64_t rows = 0, bad = 0;
    for (int shard = 0; shard < n; ++shard) {
      ReaderOptions o = SmallOptions(dir.File("noise.tsv"));
      o.max_bad_lines_fraction = 1.0;
      o.num_shards = n;
      o.shard_index = shard;
      o.schema.max_line_bytes = 64;
      auto reader = *DataReader::Open(o);
      rows += static_cast<int64_t>(Drain(reader.get()).size());
      bad += reader->stats().bad_lines;
    }
    EXPECT_GE(rows, 50);
    EXPECT_EQ(rows + bad, lines) << "n=" << n;
  }
}

TEST(ReadAll, LoadsTheWholeShardAndSplitsIntoBatches) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 100);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.num_shards = 2;
  o.shard_index = 1;
  std::shared_ptr<const Batch> second = *ReadAll(o);
  o.shard_index = 0;
  std::shared_ptr<const Batch> first = *ReadAll(o);
  EXPECT_EQ(first->size + second->size, 100);
  std::shared_ptr<const Batch> both = *ConcatBatches({first, second});
  EXPECT_EQ(both->ids[0], Ids(0, 100));
  std::vector<std::shared_ptr<const Batch>> parts = SplitBatch(both, 32);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[3]->size, 4);
}


// --- reader_threads ---------------------------------------------------------

// Every batch of a reader (options `o`) until its end or error (`*end`).
std::vector<std::shared_ptr<const Batch>> AllBatches(const ReaderOptions& o,
                                                     absl::Status* end = nullptr,
                                                     ReaderStats* stats = nullptr) {
  std::vector<std::shared_ptr<const Batch>> batches;
  absl::StatusOr<std::unique_ptr<DataReader>> reader = DataReader::Open(o);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return batches;
  while (true) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = (*reader)->Next();
    if (end != nullptr) *end = b.status();
    if (end == nullptr) {
      EXPECT_TRUE(b.ok()) << b.status();
    }
    if (!b.ok() || *b == nullptr) break;
    batches.push_back(*b);
  }
  if (stats != nullptr) *stats = (*reader)->stats();
  return batches;
}

// The same batches, in the same order.
void ExpectSameBatches(const std::vector<std::shared_ptr<const Batch>>& want,
                       const std::vector<std::shared_ptr<const Batch>>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(BatchesEqual(*want[i], *got[i])) << what << ": batch " << i;
  }
}

std::string ParquetFixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / "parquet" / "fixtures" / name).string();
}

// Three fixtures of the same columns (3, 2 and 2 row groups) and a schema
// that reads some of each kind: numbers, strings, a list, an integer id.
Schema FixturesSchema(const ScratchDir& dir) {
  for (const char* name : {"types_v1_plain", "types_v1_dict_snappy", "enc_delta"}) {
    std::filesystem::copy_file(ParquetFixture(absl::StrCat(name, ".parquet")),
                               dir.File(absl::StrCat(name, ".parquet")));
  }
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(
      R"({"format": "parquet", "label": "req_i32 > 0", "dense_transform": "log1p_clamp",
          "dense": ["i16", "f64", "u32"], "sparse": ["s", "ls", "i64", "fsb"],
          "ignore": "rest"})",
      "test", {dir.File("*.parquet")}, 0);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? f->schema : Schema();
}

TEST(ReaderThreads, TextGivesTheSameBatchesWhateverTheThreadsAndShards) {
  ScratchDir dir;
  std::string a, c;
  for (int r = 0; r < 400; ++r) a += r % 97 == 5 ? "not a row\n" : RowLine(r);
  WriteFile(dir.File("a.tsv"), a);
  std::string b;
  for (int r = 400; r < 650; ++r) b += RowLine(r);
  WriteFile(dir.File("b.tsv.gz"), *CompressBytes(b, Compression::kGzip, -1));
  for (int r = 650; r < 900; ++r) c += RowLine(r);
  c.pop_back();  // no final '\n'
  WriteFile(dir.File("c.tsv"), c);
  for (int shards : {1, 2}) {
    for (int shard = 0; shard < shards; ++shard) {
      ReaderOptions o = SmallOptions(dir.File("*.tsv*"));
      o.num_shards = shards;
      o.shard_index = shard;
      o.shuffle_buffer_rows = 50;
      o.epochs = 2;
      o.max_bad_lines_fraction = 0.05;
      o.reader_unit_bytes = 101;  // many units, cut mid-line
      ReaderStats one_stats;
      const std::vector<std::shared_ptr<const Batch>> one = AllBatches(o, nullptr, &one_stats);
      EXPECT_GT(one.size(), 10u);
      for (int threads : {2, 3}) {
        o.reader_threads = threads;
        ReaderStats stats;
        const std::string what = absl::StrCat("shard ", shard, " of ", shards, ", ", threads, " threads");
        ExpectSameBatches(one, AllBatches(o, nullptr, &stats), what);
        EXPECT_EQ(stats.rows, one_stats.rows) << what;
        EXPECT_EQ(stats.bad_lines, one_stats.bad_lines) << what;
      }
    }
  }
}

TEST(ReaderThreads, ParquetRowGroupsGiveTheSameBatchesWhateverTheThreadsAndShards) {
  ScratchDir dir;
  const Schema schema = FixturesSchema(dir);
  int64_t rows = 0;
  for (int shards : {1, 2}) {
    for (int shard = 0; shard < shards; ++shard) {
      ReaderOptions o;
      o.patterns = {dir.File("*.parquet")};
      o.schema = schema;
      o.batch_size = 16;
      o.num_shards = shards;
      o.shard_index = shard;
      o.shuffle_buffer_rows = 40;
      ReaderStats one_stats;
      const std::vector<std::shared_ptr<const Batch>> one = AllBatches(o, nullptr, &one_stats);
      rows += one_stats.rows;
      for (int threads : {2, 3}) {
        o.reader_threads = threads;
        ExpectSameBatches(one, AllBatches(o),
                          absl::StrCat("shard ", shard, " of ", shards, ", ", threads, " threads"));
      }
    }
  }
  EXPECT_EQ(rows, 2 * 3 * 90);  // each file's 90 rows, once with 1 shard and once over 2
}

TEST(ReaderThreads, CorruptParquetRowGroupIsDataLossNamingTheFileAfterTheRowsBeforeIt) {
  ScratchDir dir;
  const Schema schema = FixturesSchema(dir);
  const std::string path = dir.File("types_v1_plain.parquet");
  {
    // Garbage over the first page header of row group 1's label chunk.
    auto file = *parquet::ParquetFile::Open(path);
    const int64_t at = file->chunk_range(1, file->FindColumn("req_i32")).offset;
    std::string bytes = testing_util::ReadFile(path);
    for (int64_t i = at; i < at + 6; ++i) bytes[static_cast<size_t>(i)] = '\xff';
    WriteFile(path, bytes);
  }
  for (int threads : {1, 2, 3}) {
    ReaderOptions o;
    o.patterns = {dir.File("*.parquet")};
    o.schema = schema;
    o.batch_size = 16;
    o.reader_threads = threads;
    absl::Status end;
    const std::vector<std::shared_ptr<const Batch>> batches = AllBatches(o, &end);
    EXPECT_EQ(end.code(), absl::StatusCode::kDataLoss) << end;
    EXPECT_NE(end.message().find("types_v1_plain.parquet"), std::string::npos) << end;
    // The other files' 2 x 90 rows and row group 0's 40 come first, in full batches.
    EXPECT_EQ(batches.size(), 220u / 16) << threads << " threads";
  }
}

TEST(ReaderThreads, TooManyBadLinesIsTheSameErrorOverTheTotals) {
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 3000; ++r) s += r % 50 == 3 ? "1\tx\t\ta\tb\n" : RowLine(r);  // 2% bad
  WriteFile(dir.File("bad.tsv"), s);
  ReaderOptions o = SmallOptions(dir.File("bad.tsv"));
  o.reader_unit_bytes = 1000;
  absl::Status one;
  AllBatches(o, &one);
  EXPECT_EQ(one.code(), absl::StatusCode::kInvalidArgument) << one;
  for (int threads : {2, 3}) {
    o.reader_threads = threads;
    absl::Status end;
    AllBatches(o, &end);
    EXPECT_EQ(end, one) << threads << " threads";  // same counts, same latest line bad.tsv:LINE
  }
}

TEST(ReaderThreads, ReadAllIsTheSame) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 500);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.shuffle_buffer_rows = 30;
  o.reader_unit_bytes = 333;
  std::shared_ptr<const Batch> one = *ReadAll(o);
  o.reader_threads = 4;
  EXPECT_TRUE(BatchesEqual(*one, **ReadAll(o)));
}

TEST(ReaderThreads, DestructorStopsThreadsPromptlyAndBadCountsAreChecked) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 5000);
  ReaderOptions o = SmallOptions(dir.File("a.tsv"));
  o.epochs = 0;  // forever
  o.prefetch_batches = 1;
  o.batch_size = 4;
  o.reader_threads = 3;
  o.reader_unit_bytes = 1000;
  {
    auto reader = *DataReader::Open(o);
    for (int i = 0; i < 3; ++i) ASSERT_NE(*reader->Next(), nullptr);
  }  // returning is the check
  o.reader_threads = 0;
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.reader_threads = 65;
  EXPECT_EQ(DataReader::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkUnits, CutPlainRangesAndParquetRowGroupsButNotCompressedFiles) {
  ScratchDir dir;
  WriteRows(dir.File("a.tsv"), 0, 100);
  WriteFile(dir.File("b.tsv.gz"), *CompressBytes(RowLine(0), Compression::kGzip, -1));
  std::filesystem::copy_file(ParquetFixture("types_v1_plain.parquet"), dir.File("c.parquet"));
  std::vector<InputFile> files = *ExpandFilePatterns({dir.File("*")});
  ASSERT_EQ(files.size(), 3u);
  const std::vector<FileRange> ranges = ShardRanges(files, 0, 1);
  const std::vector<FileRange> units = WorkUnits(files, ranges, 500);
  // In order, each file's units contiguous from 0 to its size.
  std::vector<int> per_file(files.size(), 0);
  for (size_t i = 0; i < units.size(); ++i) {
    const FileRange& u = units[i];
    const bool first = i == 0 || units[i - 1].file != u.file;
    EXPECT_EQ(u.begin, first ? 0 : units[i - 1].end) << i;
    EXPECT_LT(u.begin, u.end) << i;
    if (i + 1 == units.size() || units[i + 1].file != u.file) {
      EXPECT_EQ(u.end, files[static_cast<size_t>(u.file)].size);
    }
    ++per_file[static_cast<size_t>(u.file)];
  }
  EXPECT_EQ(per_file, (std::vector<int>{static_cast<int>(files[0].size / 500), 1, 3}));
}
}  // namespace
}  // namespace pstrain::worker
