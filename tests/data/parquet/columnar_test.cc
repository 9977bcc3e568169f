// The columnar path (ParquetRows::AppendRows, ShardScanner::AppendRows, the
// DataReader without a shuffle): the same batches, bad rows, messages and
// errors as the row path (Next / NextRow and BatchBuilder::Append), on files
// with nulls, lists, multi-hot strings, time parts, several row groups,
// dictionary chunks falling back to PLAIN mid-chunk and bad rows, whatever
// the number of rows asked for at a time (batch boundaries inside a row
// group).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/batch_builder.h"
#include "data/file_set.h"
#include "data/parquet_rows.h"
#include "data/reader.h"
#include "data/schema_file.h"
#include "data/shard_scanner.h"
#include "tests/data/parquet/parquet_builder.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

const std::string kSource = std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/";

// A file and the schema that reads it.
struct Input {
  std::string path;
  Schema schema;
};

Schema LoadSchema(const std::string& json, const std::string& path) {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(json, "s.json", {path}, 0);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? f->schema : Schema();
}

// The wide fixtures: nulls, a LIST, time parts of a timestamp, a DATE, row
// groups of 40, 40 and 10; with `label` as the label ("i32 > 0": its nulls
// are bad rows).
constexpr char kWideSchema[] = R"({"format": "parquet", "label": "LABEL",
  "dense": ["i32", {"column": "f64", "missing": -1}, {"column": "ts_us", "time": "hour"}],
  "sparse": ["s", "ls", "i64", {"column": "ts_us", "time": "weekday"}, "date"],
  "ignore": "rest"})";

std::vector<Input> Inputs() {
  std::vector<Input> in;
  for (const char* v : {"snappy_dict", "zstd_dict", "snappy_plain", "zstd_plain", "gzip_dict",
                        "none_v2", "zstd_dict_row_groups", "zstd_lists_as_text"}) {
    const std::string path = kSource + "same_rows/" + v + ".parquet";
    absl::StatusOr<SchemaFile> f = LoadSchemaFile(kSource + "same_rows/parquet.json", {path}, 0);
    EXPECT_TRUE(f.ok()) << f.status();
    if (f.ok()) in.push_back({path, f->schema});
  }
  for (const char* v : {"types_v1_plain", "types_v1_dict_snappy", "types_v2_dict_zstd"}) {
    const std::string path = kSource + "fixtures/" + v + ".parquet";
    for (const char* label : {"req_i32 > 0", "i32 > 0"}) {
      std::string json = kWideSchema;
      json.replace(json.find("LABEL"), 5, label);
      // A column serves one role: the nullable label replaces dense "i32".
      if (label[0] == 'i') json.replace(json.find("\"i32\", "), 7, "");
      in.push_back({path, LoadSchema(json, path)});
    }
  }
  return in;
}

// What a path read: the rows as one batch, the bad rows ("WHERE: WHY").
struct Read {
  std::shared_ptr<const Batch> batch;
  std::vector<std::string> bad;
};

// ParquetRows row by row (the reference).
Read RowByRow(const Input& in) {
  ParquetRows rows(in.schema);
  EXPECT_TRUE(rows.Open(in.path, 0, std::numeric_limits<uint64_t>::max()).ok());
  BatchBuilder builder(in.schema.num_dense, in.schema.num_sparse, 0,
                       static_cast<int>(in.schema.extra_labels.size()));
  Read out;
  ParsedRow row;
  std::string bad;
  while (true) {
    absl::StatusOr<bool> more = rows.Next(&row, &bad);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (!bad.empty()) {
      out.bad.push_back(absl::StrCat(rows.Where(), ": ", bad));
    } else {
      EXPECT_TRUE(builder.Append(row));
    }
  }
  out.batch = builder.Finish();
  return out;
}

// ParquetRows::AppendRows, `max_rows` at a time, into batches of at most
// `batch_rows` rows, concatenated.
Read Columnar(const Input& in, int64_t max_rows, int batch_rows) {
  ParquetRows rows(in.schema);
  EXPECT_TRUE(rows.Open(in.path, 0, std::numeric_limits<uint64_t>::max()).ok());
  BatchBuilder builder(in.schema.num_dense, in.schema.num_sparse, 0,
                       static_cast<int>(in.schema.extra_labels.size()));
  Read out;
  std::vector<std::shared_ptr<const Batch>> batches;
  std::string bad;
  for (int calls = 0; calls < 1000000; ++calls) {
    const int64_t want = std::min<int64_t>(max_rows, batch_rows - builder.size());
    absl::StatusOr<RowsAppended> a = rows.AppendRows(&builder, want, &bad);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) break;
    EXPECT_LE(a->rows, want);
    EXPECT_TRUE(ValidateBatch(*builder.batch_for_append()).ok())
        << ValidateBatch(*builder.batch_for_append());
    if (!bad.empty()) out.bad.push_back(absl::StrCat(rows.Where(), ": ", bad));
    if (builder.size() == batch_rows) batches.push_back(builder.Finish());
    if (a->end) break;
  }
  if (!builder.empty()) batches.push_back(builder.Finish());
  if (batches.empty()) {
    out.batch = builder.Finish();
  } else {
    absl::StatusOr<std::shared_ptr<const Batch>> all = ConcatBatches(batches);
    EXPECT_TRUE(all.ok()) << all.status();
    out.batch = all.ok() ? *all : nullptr;
  }
  return out;
}

TEST(ParquetColumnar, AppendRowsGivesTheRowPathsRowsAndBadRows) {
  int files_with_bad_rows = 0, files_with_lists = 0;
  for (const Input& in : Inputs()) {
    SCOPED_TRACE(in.path + " label " + in.schema.label.name);
    const Read want = RowByRow(in);
    ASSERT_GT(want.batch->size, 0);
    files_with_bad_rows += !want.bad.empty();
    for (int f = 0; f < want.batch->num_sparse; ++f) {
      if (want.batch->ids[f].size() != static_cast<size_t>(want.batch->size)) {
        ++files_with_lists;
        break;
      }
    }
    for (int64_t max_rows : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{39}, int64_t{1000},
                             std::numeric_limits<int64_t>::max()}) {
      for (int batch_rows : {5, 64, std::numeric_limits<int>::max()}) {
        SCOPED_TRACE(absl::StrCat(max_rows, " rows a call, batches of ", batch_rows));
        const Read got = Columnar(in, max_rows, batch_rows);
        ASSERT_NE(got.batch, nullptr);
        EXPECT_TRUE(BatchesEqual(*got.batch, *want.batch))
            << got.batch->size << " rows, want " << want.batch->size;
        EXPECT_EQ(got.bad, want.bad);
      }
    }
  }
  EXPECT_GE(files_with_bad_rows, 10) << "the fixtures' bad rows";
  EXPECT_GE(files_with_lists, 10) << "the fixtures' lists and multi-hot strings";
}

// A hand-made file: a dictionary chunk that falls back to PLAIN pages and
// back to the dictionary mid-chunk, with nulls.
std::string FallbackFile() {
  using parquet::testing::BuildFile;
  using parquet::testing::Le32;
  using parquet::testing::PlainInt64;
  using parquet::testing::RleRun;
  using parquet::testing::TestChunk;
  using parquet::testing::TestPage;
  constexpr int32_t kInt64 = 2, kByteArray = 6, kRequired = 0, kOptional = 1;
  constexpr int32_t kPlain = 0, kPlainDictionary = 2, kRleDictionary = 8;
  const auto strings = [](const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& v : values) out += Le32(static_cast<uint32_t>(v.size())) + v;
    return out;
  };
  const auto optional_page = [](const std::string& def, int32_t n, int32_t encoding,
                                const std::string& values) {
    TestPage p;
    p.body = Le32(static_cast<uint32_t>(def.size())) + def + values;
    p.num_values = n;
    p.encoding = encoding;
    return p;
  };
  TestPage dict;
  dict.type = 2;
  dict.body = strings({"x", "yy"});
  dict.num_values = 2;
  dict.encoding = kPlainDictionary;
  const std::vector<TestPage> s_pages = {
      dict,
      optional_page(RleRun(1, 1, 1) + RleRun(1, 0, 1) + RleRun(1, 1, 1), 3, kRleDictionary,
                    std::string("\x01") + RleRun(1, 1, 1) + RleRun(1, 0, 1)),
      optional_page(RleRun(1, 0, 1) + RleRun(2, 1, 1), 3, kPlain, strings({"pear", ""})),
      optional_page(RleRun(1, 1, 1), 1, kPlainDictionary, std::string("\x01") + RleRun(1, 1, 1))};
  TestPage labels;
  labels.body = PlainInt64({1, 0, 1, 1, 0, 0, 1});
  labels.num_values = 7;
  labels.encoding = kPlain;
  return BuildFile({{"label", kInt64, kRequired}, {"s", kByteArray, kOptional}},
                   {TestChunk{0, 7, {labels}, "label", kInt64},
                    TestChunk{0, 7, s_pages, "s", kByteArray}},
                   7);
}

TEST(ParquetColumnar, ADictionaryFallingBackToPlainMidChunkReadsTheSame) {
  testing_util::ScratchDir dir;
  const std::string path = dir.File("fallback.parquet");
  testing_util::WriteFile(path, FallbackFile());
  const Input in{path, LoadSchema(R"({"format": "parquet", "label": "label", "sparse": ["s"]})",
                                  path)};
  const Read want = RowByRow(in);
  ASSERT_EQ(want.batch->size, 7);
  // "yy", null, "x", null, "pear", "", "yy": the two "yy" are one id, the
  // nulls and the empty string the missing id.
  const std::vector<uint64_t>& ids = want.batch->ids[0];
  EXPECT_EQ(ids[0], ids[6]);
  EXPECT_EQ(ids[1], MissingId(0, in.schema.sparse[0].hash_buckets));
  EXPECT_EQ(ids[1], ids[3]);
  EXPECT_EQ(ids[1], ids[5]);
  EXPECT_NE(ids[0], ids[2]);
  EXPECT_NE(ids[4], ids[1]);
  for (int64_t max_rows : {int64_t{1}, int64_t{2}, int64_t{100}}) {
    const Read got = Columnar(in, max_rows, 3);
    EXPECT_TRUE(BatchesEqual(*got.batch, *want.batch)) << max_rows;
  }
}

// ShardScanner: AppendRows and NextRow give the same rows, counts, and the
// same too-many-bad-rows errors (early judgement included: its counts are
// the good rows before the bad one).
TEST(ParquetColumnar, ScannerAppendRowsCountsAndJudgesBadRowsAsNextRow) {
  for (const Input& in : Inputs()) {
    SCOPED_TRACE(in.path + " label " + in.schema.label.name);
    absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({in.path});
    ASSERT_TRUE(files.ok());
    for (double fraction : {0.0, 0.05, 1.0}) {
      for (double early : {0.0, double{1 << 25}}) {
        SCOPED_TRACE(absl::StrCat("fraction ", fraction, " early ", early));
        ScannerOptions so;
        so.schema = in.schema;
        so.max_bad_lines_fraction = fraction;
        so.early_judgement_min_lines = early;
        auto rows = *ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
        auto cols = *ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
        BatchBuilder want(in.schema.num_dense, in.schema.num_sparse, 0,
                          static_cast<int>(in.schema.extra_labels.size()));
        BatchBuilder got(in.schema.num_dense, in.schema.num_sparse, 0,
                         static_cast<int>(in.schema.extra_labels.size()));
        absl::Status want_status, got_status;
        ParsedRow row;
        while (true) {
          absl::StatusOr<bool> more = rows->NextRow(&row);
          if (!more.ok()) want_status = more.status();
          if (!more.ok() || !*more) break;
          want.Append(row);
        }
        while (true) {
          absl::StatusOr<RowsAppended> a = cols->AppendRows(&got, 6);
          if (!a.ok()) got_status = a.status();
          if (!a.ok() || a->end) break;
          ASSERT_EQ(a->rows, 6) << "fewer rows than asked: only at the end";
        }
        EXPECT_EQ(got_status, want_status);
        EXPECT_EQ(cols->good_lines(), rows->good_lines());
        EXPECT_EQ(cols->bad_lines(), rows->bad_lines());
        if (want_status.ok()) {
          EXPECT_TRUE(BatchesEqual(*got.Finish(), *want.Finish()));
        }
      }
    }
  }
}

// The DataReader without a shuffle reads column by column: the same rows as
// the row path, in batches of batch_size cut inside row groups, with 1 and
// 2 decoding threads, and its stats count the bad rows.
TEST(ParquetColumnar, ReaderBatchesAreTheRowPathsRows) {
  for (const Input& in : Inputs()) {
    SCOPED_TRACE(in.path + " label " + in.schema.label.name);
    const Read want = RowByRow(in);
    for (int threads : {1, 2}) {
      ReaderOptions o;
      o.patterns = {in.path};
      o.schema = in.schema;
      o.batch_size = 7;
      o.reader_threads = threads;
      o.max_bad_lines_fraction = 1.0;
      absl::StatusOr<std::unique_ptr<DataReader>> reader = DataReader::Open(o);
      ASSERT_TRUE(reader.ok()) << reader.status();
      std::vector<std::shared_ptr<const Batch>> batches;
      while (true) {
        absl::StatusOr<std::shared_ptr<const Batch>> b = (*reader)->Next();
        ASSERT_TRUE(b.ok()) << b.status();
        if (*b == nullptr) break;
        batches.push_back(*b);
      }
      ASSERT_FALSE(batches.empty());
      for (size_t k = 0; k + 1 < batches.size(); ++k) EXPECT_EQ(batches[k]->size, 7);
      EXPECT_TRUE(BatchesEqual(**ConcatBatches(batches), *want.batch)) << threads << " threads";
      EXPECT_EQ((*reader)->stats().bad_lines, static_cast<int64_t>(want.bad.size()));
      // ReadAll (evaluation sets) too.
      absl::StatusOr<std::shared_ptr<const Batch>> all = ReadAll(o);
      ASSERT_TRUE(all.ok()) << all.status();
      EXPECT_TRUE(BatchesEqual(**all, *want.batch)) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace pstrain::worker
