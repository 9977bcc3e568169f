// A reader's position (Batch::end) and a reader started there
// (ReaderOptions::start): over Parquet files of several row groups, with bad
// rows, and over text (whole, and a shard starting mid-file), with a batch
// size that cuts row groups and files, and two epochs, a reader started at
// any batch's end gives exactly the batches that followed it, without
// reading what came before; where the rows do not come in file order (a
// shuffle buffer, two decoding threads) or have no place to start at (a
// compressed file's lines) the position is unknown, and a start there is
// refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_builder.h"
#include "data/reader.h"
#include "data/schema_file.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

const std::string kSource = std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/";

struct Read {
  std::vector<std::shared_ptr<const Batch>> batches;
  std::vector<int> epochs;
};

Read ReadAllBatches(const ReaderOptions& o) {
  Read r;
  absl::StatusOr<std::unique_ptr<DataReader>> reader = DataReader::Open(o);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return r;
  while (true) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = (*reader)->Next();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok() || *b == nullptr) break;
    r.batches.push_back(*b);
    r.epochs.push_back((*reader)->last_epoch());
  }
  return r;
}

// The inputs: two Parquet files of one schema as one shard (`same_rows`',
// 900 rows, several row groups in the first), the wide fixtures (row groups
// of 40, 40 and 10, nulls in the label making bad rows), or the same rows
// as text, whole and as the second of two shards (its range starting
// mid-file); in batches that cut row groups and files, over two epochs.
enum class Input { kParquet, kBadRows, kText, kTextSecondShard };

ReaderOptions Inputs(Input in) {
  ReaderOptions o;
  absl::StatusOr<SchemaFile> f;
  if (in == Input::kBadRows) {
    o.patterns = {kSource + "fixtures/types_v1_dict_snappy.parquet",
                  kSource + "fixtures/types_v2_dict_zstd.parquet"};
    f = ParseSchemaJson(R"({"format": "parquet", "label": "i32 > 0",
        "dense": [{"column": "f64", "missing": -1}], "sparse": ["s", "ls", "i64", "date"],
        "ignore": "rest"})", "s.json", o.patterns, 0);
    o.batch_size = 13;
  } else if (in == Input::kParquet) {
    o.patterns = {kSource + "same_rows/zstd_dict_row_groups.parquet",
                  kSource + "same_rows/snappy_dict.parquet"};
    f = LoadSchemaFile(kSource + "same_rows/parquet.json", o.patterns, 0);
    o.batch_size = 64;
  } else {
    o.patterns = {kSource + "same_rows/rows.tsv"};
    f = LoadSchemaFile(kSource + "same_rows/tsv.json", o.patterns, 0);
    o.batch_size = 64;
    if (in == Input::kTextSecondShard) {
      o.num_shards = 2;
      o.shard_index = 1;
    }
  }
  EXPECT_TRUE(f.ok()) << f.status();
  if (f.ok()) o.schema = f->schema;
  o.epochs = 2;
  o.max_bad_lines_fraction = 1.0;
  return o;
}

const char* Name(Input in) {
  switch (in) {
    case Input::kParquet: return "same_rows Parquet";
    case Input::kBadRows: return "the wide fixtures, bad rows";
    case Input::kText: return "same_rows TSV";
    case Input::kTextSecondShard: return "same_rows TSV, the second of 2 shards";
  }
  return "";
}

TEST(ReaderPosition, AStartAtAnyBatchEndGivesTheBatchesAfterIt) {
  for (Input in : {Input::kParquet, Input::kBadRows, Input::kText, Input::kTextSecondShard}) {
    SCOPED_TRACE(Name(in));
    const ReaderOptions o = Inputs(in);
    const Read all = ReadAllBatches(o);
    ASSERT_GT(all.batches.size(), 4u);
    int mid_file = 0;
    for (size_t k = 0; k < all.batches.size(); ++k) {
      const SourcePosition& end = all.batches[k]->end;
      ASSERT_TRUE(end.known()) << "batch " << k;
      if (end.row_group > 0 || end.offset > 0) ++mid_file;
      ReaderOptions from = o;
      from.first_epoch = all.epochs[k];
      from.start = end;
      const Read rest = ReadAllBatches(from);
      ASSERT_EQ(rest.batches.size(), all.batches.size() - k - 1) << "after batch " << k;
      for (size_t j = 0; j < rest.batches.size(); ++j) {
        ASSERT_TRUE(BatchesEqual(*rest.batches[j], *all.batches[k + 1 + j]))
            << "batch " << j << " after a start at batch " << k << "'s end ("
            << DescribePosition(end) << ")";
        EXPECT_EQ(rest.epochs[j], all.epochs[k + 1 + j]);
      }
    }
    EXPECT_GT(mid_file, 0) << "no batch ended inside a file past its first row group";
  }
}

// Where rows do not come in file order the position is unknown, and a
// start is refused before the reader starts; a compressed file's lines
// have no place in it to start at.
TEST(ReaderPosition, UnknownWhereRowsAreNotInFileOrder) {
  ReaderOptions shuffled = Inputs(Input::kParquet);
  shuffled.shuffle_buffer_rows = 100;
  ReaderOptions threads = Inputs(Input::kText);
  threads.reader_threads = 2;
  for (const ReaderOptions& o : {shuffled, threads}) {
    const Read all = ReadAllBatches(o);
    ASSERT_FALSE(all.batches.empty());
    for (const auto& b : all.batches) EXPECT_FALSE(b->end.known());
    ReaderOptions from = o;
    from.start.range = 0;
    absl::StatusOr<std::unique_ptr<DataReader>> r = DataReader::Open(from);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()),
                ::testing::HasSubstr("a start mid-shard needs one reader thread, no shuffle buffer"));
  }
  // A gzip file: unknown inside it; at its end (the pass's): known.
  const std::string dir = ::testing::TempDir() + "/reader_position_gz";
  std::filesystem::create_directories(dir);
  const std::string gz = dir + "/rows.tsv.gz";
  ASSERT_EQ(std::system(("gzip -c " + kSource + "same_rows/rows.tsv > " + gz).c_str()), 0);
  ReaderOptions text = Inputs(Input::kText);
  text.patterns = {gz};
  text.epochs = 1;
  const Read all = ReadAllBatches(text);
  ASSERT_GT(all.batches.size(), 2u);
  EXPECT_FALSE(all.batches.front()->end.known());
  EXPECT_TRUE(all.batches.back()->end.known());
  EXPECT_EQ(all.batches.back()->end.range, 1);
  std::filesystem::remove_all(dir);
}

// A text file whose last line has no newline, a batch ending at that line:
// its end (one byte past the file) starts a reader with nothing left of the
// epoch; a batch ending at the line before starts at the last line.
TEST(ReaderPosition, ATextFileWithoutAFinalNewline) {
  const std::string dir = ::testing::TempDir() + "/reader_position_eof";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/rows.tsv";
  {
    const std::string all = testing_util::ReadFile(kSource + "same_rows/rows.tsv");
    size_t end = 0;
    for (int line = 0; line < 11; ++line) end = all.find('\n', end) + 1;  // the header and 10 rows
    std::ofstream(path) << all.substr(0, end - 1);  // without the last newline
  }
  ReaderOptions o = Inputs(Input::kText);
  o.patterns = {path};
  o.batch_size = 5;
  const Read all = ReadAllBatches(o);
  ASSERT_EQ(all.batches.size(), 4u);  // 2 epochs of 10 rows
  for (size_t k = 0; k < all.batches.size(); ++k) {
    ASSERT_TRUE(all.batches[k]->end.known()) << k;
    ReaderOptions from = o;
    from.first_epoch = all.epochs[k];
    from.start = all.batches[k]->end;
    const Read rest = ReadAllBatches(from);
    ASSERT_EQ(rest.batches.size(), all.batches.size() - k - 1) << "after batch " << k;
    for (size_t j = 0; j < rest.batches.size(); ++j) {
      EXPECT_TRUE(BatchesEqual(*rest.batches[j], *all.batches[k + 1 + j])) << k << " " << j;
    }
  }
  std::filesystem::remove_all(dir);
}

// A start that this shard has no such place for is an error at the first
// batch, naming the file.
TEST(ReaderPosition, AStartOutsideTheShardIsAnError) {
  ReaderOptions o = Inputs(Input::kParquet);
  o.start.range = 0;
  o.start.row_group = 99;
  absl::StatusOr<std::unique_ptr<DataReader>> r = DataReader::Open(o);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::shared_ptr<const Batch>> b = (*r)->Next();
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              ::testing::MatchesRegex(".*/same_rows/[a-z_]+\\.parquet: no row 0 of row group 99 in "
                                      "this reader's part of the file"));
}

}  // namespace
}  // namespace pstrain::worker
