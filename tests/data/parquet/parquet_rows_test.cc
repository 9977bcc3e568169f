// Parquet through the schema: every value reads as its text would (ids of
// the text's tokens, nulls missing, lists as bags, time parts), shards split
// a file by row group and together read every row once, a file lacking a
// column is named, and folders expand recursively.
#include "data/parquet_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "data/file_set.h"
#include "data/reader.h"
#include "data/schema_file.h"
#include "data/time_parts.h"

namespace pstrain::worker {
namespace {

const std::string kFixtures = std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/fixtures/";

// types_v1_plain.parquet: 90 rows in row groups of 40, 40 and 10
// (make_fixtures.mjs), the values of wide.json.
const std::string kWide = kFixtures + "types_v1_plain.parquet";

constexpr char kSchema[] = R"({"format": "parquet", "label": "req_i32 > 0",
  "dense": ["i32", {"column": "f64", "missing": -1}, {"column": "ts_us", "time": "hour"}],
  "sparse": ["s", "ls", "i64", {"column": "ts_us", "time": "weekday"}, "date"],
  "ignore": "rest"})";

Schema WideSchema() {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(kSchema, "s.json", {kWide}, 0);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? f->schema : Schema();
}

nlohmann::json WideValues() {
  std::ifstream in(kFixtures + "wide.json");
  return nlohmann::json::parse(in);
}

uint64_t Id(int field, const std::string& token) { return FeatureId(field, token, 0); }

TEST(ParquetRows, EveryValueReadsAsItsTextWould) {
  const Schema schema = WideSchema();
  ASSERT_TRUE(schema.parquet);
  ASSERT_EQ(schema.num_sparse, 5);
  EXPECT_EQ(schema.sparse[1].multi_hot_sep, '|') << "a LIST is multi-hot by itself";
  EXPECT_EQ(schema.sparse[3].name, "ts_us_weekday");
  const nlohmann::json v = WideValues();
  const nlohmann::json& c = v["columns"];
  ParquetRows rows(schema);
  ASSERT_TRUE(rows.Open(kWide, 0, ~uint64_t{0}).ok());
  ParsedRow row;
  std::string bad;
  for (int r = 0; r < v["num_rows"].get<int>(); ++r) {
    SCOPED_TRACE(r);
    absl::StatusOr<bool> more = rows.Next(&row, &bad);
    ASSERT_TRUE(more.ok()) << more.status();
    ASSERT_TRUE(*more);
    ASSERT_EQ(bad, "");
    EXPECT_EQ(row.label, std::stoll(c["req_i32"][r].get<std::string>()) > 0 ? 1.0f : 0.0f);
    // Dense: the value (a null is the missing value), an hour of a timestamp.
    const nlohmann::json& i32 = c["i32"][r];
    EXPECT_EQ(row.dense[0], i32.is_null() ? 0.0f : static_cast<float>(std::stod(i32.get<std::string>())));
    const nlohmann::json& f64 = c["f64"][r];
    EXPECT_EQ(row.dense[1], f64.is_null() ? -1.0f : static_cast<float>(f64.get<double>()));
    const nlohmann::json& ts = c["ts_us"][r];
    int64_t seconds = 0;
    if (!ts.is_null()) {
      const int64_t us = std::stoll(ts.get<std::string>());
      seconds = us / 1000000 - (us % 1000000 < 0 ? 1 : 0);
      EXPECT_EQ(row.dense[2], static_cast<float>(TimePartOf(seconds, TimePart::kHour)));
    }
    // Sparse: the text's ids.
    const auto field = [&](int f) {
      return std::vector<uint64_t>(row.ids.begin() + row.field_begin(f), row.ids.begin() + row.field_end[f]);
    };
    const nlohmann::json& s = c["s"][r];
    // An empty string is missing in text too.
    EXPECT_EQ(field(0), std::vector<uint64_t>{s.is_null() || s.get<std::string>().empty()
                                                  ? MissingId(0, 0)
                                                  : Id(0, s.get<std::string>())});
    std::vector<uint64_t> tags;
    if (c["ls"][r].is_array()) {
      for (const nlohmann::json& t : c["ls"][r]) {
        if (!t.is_null() && !t.get<std::string>().empty()) tags.push_back(Id(1, t.get<std::string>()));
      }
    }
    if (tags.empty()) tags.push_back(MissingId(1, 0));  // a null or empty list, or only nulls
    EXPECT_EQ(field(1), tags);
    const nlohmann::json& i64 = c["i64"][r];
    EXPECT_EQ(field(2), std::vector<uint64_t>{i64.is_null() ? MissingId(2, 0) : Id(2, i64.get<std::string>())});
    EXPECT_EQ(field(3), std::vector<uint64_t>{ts.is_null() ? MissingId(3, 0)
                                                           : Id(3, std::to_string(TimePartOf(seconds, TimePart::kWeekday)))});
    const nlohmann::json& date = c["date"][r];
    EXPECT_EQ(field(4), std::vector<uint64_t>{date.is_null() ? MissingId(4, 0) : Id(4, date.get<std::string>())})
        << "a DATE as a category is its day number's text";
  }
  absl::StatusOr<bool> more = rows.Next(&row, &bad);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
}

// Shards own the row groups whose first byte lies in their byte range:
// together they read every row once, in file order.
TEST(ParquetRows, ShardsSplitAFileByRowGroupAndReadEveryRowOnce) {
  ReaderOptions o;
  o.patterns = {kWide};
  o.schema = WideSchema();
  absl::StatusOr<std::shared_ptr<const Batch>> whole = ReadAll(o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ((*whole)->size, 90);
  for (int n : {2, 3, 5}) {
    std::vector<float> labels;
    std::vector<uint64_t> ids;
    int non_empty = 0;
    for (int shard = 0; shard < n; ++shard) {
      o.shard_index = shard;
      o.num_shards = n;
      absl::StatusOr<std::shared_ptr<const Batch>> part = ReadAll(o);
      ASSERT_TRUE(part.ok()) << part.status();
      non_empty += (*part)->size > 0;
      labels.insert(labels.end(), (*part)->labels.begin(), (*part)->labels.end());
      ids.insert(ids.end(), (*part)->ids[0].begin(), (*part)->ids[0].end());
      EXPECT_TRUE((*part)->size == 0 || (*part)->size == 40 || (*part)->size == 10 ||
                  (*part)->size == 50 || (*part)->size == 80)
          << "whole row groups: " << (*part)->size;
    }
    EXPECT_EQ(labels, (*whole)->labels) << n << " shards";
    EXPECT_EQ(ids, (*whole)->ids[0]) << n << " shards";
    EXPECT_GE(non_empty, 2) << n << " shards";
  }
}

TEST(ParquetRows, AFileWithoutAColumnOrAColumnOfTheWrongShapeIsNamed) {
  // codec_zstd_v1.parquet has no "ts_us" (nor "date") column.
  const std::string other = kFixtures + "codec_zstd_v1.parquet";
  ParquetRows rows(WideSchema());
  absl::Status s = rows.Open(other, 0, ~uint64_t{0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("codec_zstd_v1.parquet: no column \"ts_us\" (the dense column); "
                             "its columns: i32, i64, f64, s, li, ls, req_i32"),
            std::string::npos)
      << s;
  // A LIST as a dense column.
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(
      R"({"format": "parquet", "label": "req_i32 > 0", "dense": ["ls"], "ignore": "rest"})", "s.json",
      {kWide}, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  ParquetRows lists(f->schema);
  s = lists.Open(kWide, 0, ~uint64_t{0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("column \"ls\" (the dense column) cannot be read: it is a LIST"),
            std::string::npos)
      << s;
  // A text file named as Parquet by the schema.
  f = ParseSchemaJson(R"({"format": "parquet", "label": 0, "dense": [1]})", "s.json",
                      {kFixtures + "README.md"}, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("README.md is not a Parquet file"), std::string::npos) << f.status();
}

TEST(FileSet, AFolderIsEveryFileUnderItInPathOrderButHiddenAndMarkerFiles) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("pstrain_folders_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  for (const char* sub : {"dt=2026-12-02/hour=01", "dt=2026-12-01/hour=13", "dt=2026-12-01/.tmp"}) {
    std::filesystem::create_directories(dir / sub);
  }
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  write("dt=2026-12-02/hour=01/part-0.tsv", "1\t2\n");
  write("dt=2026-12-01/hour=13/part-1.tsv", "0\t1\n");
  write("dt=2026-12-01/hour=13/part-0.tsv", "1\t1\n");
  write("dt=2026-12-01/hour=13/_SUCCESS", "");
  write("dt=2026-12-01/hour=13/.part-0.tsv.crc", "x");
  write("dt=2026-12-01/.tmp/part-9.tsv", "x\n");
  std::filesystem::copy_file(kWide, dir / "dt=2026-12-02/hour=01/part-1.parquet");
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir.string()});
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<std::string> got;
  for (const InputFile& f : *files) {
    got.push_back(std::filesystem::relative(f.path, dir).string() + (f.parquet ? " parquet" : ""));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"dt=2026-12-01/hour=13/part-0.tsv",
                                           "dt=2026-12-01/hour=13/part-1.tsv",
                                           "dt=2026-12-02/hour=01/part-0.tsv",
                                           "dt=2026-12-02/hour=01/part-1.parquet parquet"}));
  std::filesystem::create_directories(dir / "empty/_logs");
  absl::StatusOr<std::vector<InputFile>> none = ExpandFilePatterns({(dir / "empty").string()});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  std::filesystem::remove_all(dir);
}

// Hive-style partition folders (dt=2026-12-01/hour=13/part-0.parquet) as
// columns: every row of a file holds its folders' values, in Parquet as in
// text (the same ids for the same value), Hive's null partition is missing,
// %XX escapes are decoded, and a file outside the layout is named.
TEST(Partitions, FolderKeysAreColumnsOfEveryRowInParquetAndText) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("pstrain_partitions_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string day = "dt=2026-12-01/hour=13", null_day = "dt=__HIVE_DEFAULT_PARTITION__/hour=0%37";
  for (const char* root : {"pq", "txt"}) {
    for (const std::string& sub : {day, null_day}) std::filesystem::create_directories(dir / root / sub);
  }
  std::filesystem::copy_file(kWide, dir / "pq" / day / "part-0.parquet");
  std::filesystem::copy_file(kWide, dir / "pq" / null_day / "part-0.parquet");
  std::ofstream(dir / "txt" / day / "part-0.csv") << "label,s\n1,a\n0,b\n";
  std::ofstream(dir / "txt" / null_day / "part-0.csv") << "label,s\n1,c\n";

  const auto read_all = [&](const std::string& schema, const std::string& root,
                            double max_bad_lines_fraction = ReaderOptions().max_bad_lines_fraction)
      -> absl::StatusOr<std::shared_ptr<const Batch>> {
    const std::string data = (dir / root).string();
    PS_ASSIGN_OR_RETURN(SchemaFile f, ParseSchemaJson(schema, "s.json", {data}, 0));
    ReaderOptions o;
    o.patterns = {data};
    o.schema = f.schema;
    o.max_bad_lines_fraction = max_bad_lines_fraction;
    return ReadAll(o);
  };
  const auto read = [&](const std::string& schema, const std::string& root) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = read_all(schema, root);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : std::make_shared<const Batch>();
  };
  const std::string roles = R"("dense": ["hour"],
      "sparse": ["s", "dt", {"column": "dt", "time": "weekday"}],
      "partition_columns": ["dt", "hour"])";
  const std::shared_ptr<const Batch> pq =
      read(R"({"format": "parquet", "label": "req_i32 > 0", "ignore": "rest", )" + roles + "}", "pq");
  const std::shared_ptr<const Batch> txt =
      read(R"({"format": "csv", "header": true, "label": "label", )" + roles + "}", "txt");
  ASSERT_EQ(pq->size, 180);
  ASSERT_EQ(txt->size, 3);
  const auto one_id = [](const Batch& b, int f, int r) {
    EXPECT_EQ(b.offsets[f][r + 1] - b.offsets[f][r], 1u) << "field " << f << " row " << r;
    return b.ids[f][b.offsets[f][r]];
  };
  // Path order: dt=2026-12-01 before dt=__HIVE_DEFAULT_PARTITION__.
  for (int r = 0; r < pq->size; ++r) {
    const int t = r < 90 ? 0 : 2;  // a text row of the same folder
    EXPECT_EQ(pq->dense[r], r < 90 ? 13.0f : 7.0f) << r;
    EXPECT_EQ(one_id(*pq, 1, r), one_id(*txt, 1, t)) << r;
    EXPECT_EQ(one_id(*pq, 2, r), one_id(*txt, 2, t)) << r;
  }
  EXPECT_EQ(txt->dense, (std::vector<float>{13.0f, 13.0f, 7.0f}));
  EXPECT_EQ(one_id(*txt, 1, 0), Id(1, "2026-12-01"));
  EXPECT_EQ(one_id(*txt, 1, 0), one_id(*txt, 1, 1));
  EXPECT_EQ(one_id(*txt, 1, 2), Id(1, "")) << "null partition: the missing id";
  EXPECT_NE(one_id(*txt, 2, 2), one_id(*txt, 2, 0)) << "a weekday of no date: missing";

  // A row short of a column: counted without the partition columns.
  std::ofstream(dir / "txt" / day / "part-1.csv") << "label,s\n1\n";
  const std::string text_schema =
      R"({"format": "csv", "header": true, "label": "label", )" + roles + "}";
  absl::StatusOr<std::shared_ptr<const Batch>> short_row = read_all(text_schema, "txt", 0);
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find(
                "1 field, the schema expects 2 besides the partition columns (dt, hour) its "
                "folders give"),
            std::string::npos)
      << short_row.status();
  std::filesystem::remove(dir / "txt" / day / "part-1.csv");

  // A file outside the layout: named, with the key.
  std::filesystem::create_directories(dir / "txt" / "dt=2026-12-03");
  std::ofstream(dir / "txt" / "dt=2026-12-03" / "part-0.csv") << "label,s\n1,a\n";
  absl::StatusOr<std::shared_ptr<const Batch>> bad = read_all(text_schema, "txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dt=2026-12-03/part-0.csv: no folder hour=... in its path"),
            std::string::npos)
      << bad.status();
  std::filesystem::remove_all(dir);
}

TEST(Partitions, PartitionValuesDecodeHivesEscapesAndTheLastFolderWins) {
  absl::StatusOr<std::vector<std::string>> v = PartitionValues(
      "/data/dt=2026-01-01/logs/dt=2026-12-01/city=S%C3%A3o%20Paulo/k=a%2Fb/x=%zz/f=1.parquet",
      {"city", "dt", "k", "x"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, (std::vector<std::string>{"S\xC3\xA3o Paulo", "2026-12-01", "a/b", "%zz"}));
  absl::StatusOr<std::vector<std::string>> file_name = PartitionValues("/data/f=1.parquet", {"f"});
  EXPECT_FALSE(file_name.ok()) << "the file's own name is not a folder";
}

TEST(Partitions, TheSchemaRefusesKeysThatCannotBeColumns) {
  const auto refusal = [](const std::string& schema) {
    absl::StatusOr<SchemaFile> f = ParseSchemaJson(schema, "s.json", {kWide}, 0);
    return f.ok() ? std::string("accepted") : std::string(f.status().message());
  };
  EXPECT_NE(refusal(R"({"format": "parquet", "label": "req_i32 > 0", "sparse": ["s"],
                        "ignore": "rest", "partition_columns": ["s"]})")
                .find("partition_columns: \"s\" is also a column of the columns of"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"format": "parquet", "label": "req_i32 > 0", "sparse": ["s"],
                        "ignore": "rest", "partition_columns": "dt"})")
                .find("partition_columns: not a list of names"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"format": "parquet", "label": "req_i32 > 0", "sparse": ["s"],
                        "ignore": "rest", "partition_columns": ["a=b"]})")
                .find("is not a folder key"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"format": "parquet", "label": "req_i32 > 0", "sparse": ["s"],
                        "ignore": "rest", "partition_columns": ["dt"]})")
                .find("types_v1_plain.parquet: no folder dt=... in its path"),
            std::string::npos)
      << "the first file is checked with the schema";
  absl::StatusOr<SchemaFile> no_names = ParseSchemaJson(
      R"({"label": 0, "sparse": [1], "partition_columns": ["dt"]})", "s.json", {}, 0);
  ASSERT_FALSE(no_names.ok());
  EXPECT_NE(no_names.status().message().find("the files' own columns need names too"),
            std::string::npos)
      << no_names.status();
}

}  // namespace
}  // namespace pstrain::worker
