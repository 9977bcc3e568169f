// A reader's position (Batch::end) and a reader started there
// (ReaderOptions::start): over Parquet files of several row groups, with bad
// rows, a batch size that cuts row groups and files, and two epochs, a
// reader started at any batch's end gives exactly the batches that followed
// it, without reading the row groups before; where the rows do not come in
// file order (a shuffle buffer, two decoding threads, a text file's middle)
// the position is unknown, and a start there is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

// Two Parquet files of one schema as one shard: `same_rows`' (900 rows;
// several row groups in the first), or the wide fixtures (row groups of 40,
// 40 and 10, nulls in the label making bad rows), in batches that cut row
// groups and files, over two epochs.
ReaderOptions TwoFiles(bool bad_rows) {
  ReaderOptions o;
  absl::StatusOr<SchemaFile> f;
  if (bad_rows) {
    o.patterns = {kSource + "fixtures/types_v1_dict_snappy.parquet",
                  kSource + "fixtures/types_v2_dict_zstd.parquet"};
    f = ParseSchemaJson(R"({"format": "parquet", "label": "i32 > 0",
        "dense": [{"column": "f64", "missing": -1}], "sparse": ["s", "ls", "i64", "date"],
        "ignore": "rest"})", "s.json", o.patterns, 0);
    o.batch_size = 13;
  } else {
    o.patterns = {kSource + "same_rows/zstd_dict_row_groups.parquet",
                  kSource + "same_rows/snappy_dict.parquet"};
    f = LoadSchemaFile(kSource + "same_rows/parquet.json", o.patterns, 0);
    o.batch_size = 64;
  }
  EXPECT_TRUE(f.ok()) << f.status();
  if (f.ok()) o.schema = f->schema;
  o.epochs = 2;
  o.max_bad_lines_fraction = 1.0;
  return o;
}

TEST(ReaderPosition, AStartAtAnyBatchEndGivesTheBatchesAfterIt) {
  for (bool bad_rows : {false, true}) {
    SCOPED_TRACE(bad_rows ? "the wide fixtures, bad rows" : "same_rows");
    const ReaderOptions o = TwoFiles(bad_rows);
    const Read all = ReadAllBatches(o);
    ASSERT_GT(all.batches.size(), 4u);
    int in_later_row_groups = 0;
    for (size_t k = 0; k < all.batches.size(); ++k) {
      const SourcePosition& end = all.batches[k]->end;
      ASSERT_TRUE(end.known()) << "batch " << k;
      if (end.row_group > 0) ++in_later_row_groups;
      ReaderOptions from = o;
      from.first_epoch = all.epochs[k];
      from.start = end;
      const Read rest = ReadAllBatches(from);
      ASSERT_EQ(rest.batches.size(), all.batches.size() - k - 1) << "after batch " << k;
      for (size_t j = 0; j < rest.batches.size(); ++j) {
        ASSERT_TRUE(BatchesEqual(*rest.batches[j], *all.batches[k + 1 + j]))
            << "batch " << j << " after a start at batch " << k << "'s end (" << end.file
            << ", row group " << end.row_group << ", row " << end.row << ")";
        EXPECT_EQ(rest.epochs[j], all.epochs[k + 1 + j]);
      }
    }
    EXPECT_GT(in_later_row_groups, 0) << "no batch ended past a file's first row group";
  }
}

// Where rows do not come in file order the position is unknown, and a
// start is refused before the reader starts.
TEST(ReaderPosition, UnknownWhereRowsAreNotInFileOrder) {
  ReaderOptions shuffled = TwoFiles(false);
  shuffled.shuffle_buffer_rows = 100;
  ReaderOptions threads = TwoFiles(false);
  threads.reader_threads = 2;
  for (const ReaderOptions& o : {shuffled, threads}) {
    const Read all = ReadAllBatches(o);
    ASSERT_FALSE(all.batches.empty());
    for (const auto& b : all.batches) EXPECT_FALSE(b->end.known());
    ReaderOptions from = o;
    from.start = TwoFiles(false).start;
    from.start.range = 0;
    absl::StatusOr<std::unique_ptr<DataReader>> r = DataReader::Open(from);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()),
                ::testing::HasSubstr("a start mid-shard needs one reader thread, no shuffle buffer"));
  }
  // Inside a text file: unknown; at its end (the pass's): known.
  ReaderOptions text;
  text.patterns = {kSource + "same_rows/rows.tsv"};
  absl::StatusOr<SchemaFile> f = LoadSchemaFile(kSource + "same_rows/tsv.json", text.patterns, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  text.schema = f->schema;
  text.batch_size = 100;
  const Read all = ReadAllBatches(text);
  ASSERT_GT(all.batches.size(), 2u);
  EXPECT_FALSE(all.batches.front()->end.known());
  EXPECT_TRUE(all.batches.back()->end.known());
  EXPECT_EQ(all.batches.back()->end.range, 1);
}

// A start that this shard has no such place for is an error at the first
// batch, naming the file.
TEST(ReaderPosition, AStartOutsideTheShardIsAnError) {
  ReaderOptions o = TwoFiles(false);
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
