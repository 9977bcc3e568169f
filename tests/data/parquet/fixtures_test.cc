// The reader against files written by independent writers (parquet-wasm,
// i.e. arrow-rs, and hyparquet-writer; tests/data/parquet/fixtures/
// make_fixtures.mjs): every column of every fixture decodes to exactly the
// values the writer was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "data/parquet/metadata.h"
#include "data/parquet/parquet_file.h"
#include "tests/data/parquet/parquet_test_util.h"

namespace pstrain::parquet {
namespace {

using testing::FixtureDir;
using testing::ReadAllRows;
using testing::ReadFileBytes;

struct Fixture {
  std::string file;      // without .parquet
  std::string expected;  // the .json of its data set
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

std::vector<Fixture> ListFixtures() {
  std::vector<Fixture> out;
  for (const auto& entry : std::filesystem::directory_iterator(FixtureDir())) {
    if (entry.path().extension() != ".json") continue;
    const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(entry.path().string()));
    for (const auto& f : j.at("files"))
      out.push_back({f.get<std::string>(), entry.path().string()});
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.file < b.file; });
  return out;
}

class FixtureTest : public ::testing::TestWithParam<Fixture> {};

TEST_P(FixtureTest, EveryColumnDecodesToTheWritersValues) {
  const Fixture& f = GetParam();
  const nlohmann::json expected = nlohmann::json::parse(ReadFileBytes(f.expected));
  auto file = ParquetFile::Open(FixtureDir() + "/" + f.file + ".parquet");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->num_rows(), expected.at("num_rows").get<int64_t>());
  for (const auto& [name, values] : expected.at("columns").items()) {
    SCOPED_TRACE(name);
    const int col = (*file)->FindColumn(name);
    ASSERT_GE(col, 0);
    const nlohmann::json rows = ReadAllRows(**file, col);
    ASSERT_EQ(rows.size(), values.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      ASSERT_EQ(rows[r], values[r]) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest, ::testing::ValuesIn(ListFixtures()),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           return info.param.file;
                         });

TEST(ParquetFixtures, DescribeTypesAndLogicalTypes) {
  auto file = ParquetFile::Open(FixtureDir() + "/types_v1_plain.parquet");
  ASSERT_TRUE(file.ok()) << file.status();
  const ParquetFile& f = **file;
  auto col = [&](const char* name) -> const ColumnDescriptor& {
    const int i = f.FindColumn(name);
    EXPECT_GE(i, 0) << name;
    return f.columns()[i < 0 ? 0 : i];
  };
  EXPECT_EQ(col("b").type, PhysicalType::kBoolean);
  EXPECT_TRUE(col("b").nullable);
  EXPECT_EQ(col("i8").type, PhysicalType::kInt32);
  EXPECT_EQ(col("i8").logical, LogicalKind::kInt);
  EXPECT_EQ(col("i8").int_bits, 8);
  EXPECT_TRUE(col("i8").int_signed);
  EXPECT_EQ(col("u64").type, PhysicalType::kInt64);
  EXPECT_FALSE(col("u64").int_signed);
  EXPECT_EQ(col("f32").type, PhysicalType::kFloat);
  EXPECT_EQ(col("f64").type, PhysicalType::kDouble);
  EXPECT_EQ(col("s").logical, LogicalKind::kString);
  EXPECT_EQ(col("bin").type, PhysicalType::kByteArray);
  EXPECT_EQ(col("bin").logical, LogicalKind::kNone);
  EXPECT_EQ(col("fsb").type, PhysicalType::kFixedLenByteArray);
  EXPECT_EQ(col("fsb").type_length, 5);
  EXPECT_EQ(col("date").logical, LogicalKind::kDate);
  EXPECT_EQ(col("ts_ms").logical, LogicalKind::kTimestampMillis);
  EXPECT_EQ(col("ts_us").logical, LogicalKind::kTimestampMicros);
  EXPECT_EQ(col("ts_ns").logical, LogicalKind::kTimestampNanos);
  EXPECT_FALSE(col("ts_us").utc);
  EXPECT_TRUE(col("ts_us_utc").utc);
  EXPECT_EQ(col("dec9").type, PhysicalType::kInt32);
  EXPECT_EQ(col("dec18").type, PhysicalType::kInt64);
  EXPECT_EQ(col("dec30").type, PhysicalType::kFixedLenByteArray);
  EXPECT_EQ(col("dec30").logical, LogicalKind::kDecimal);
  EXPECT_EQ(col("dec30").precision, 30);
  EXPECT_EQ(col("dec30").scale, 3);
  EXPECT_EQ(col("dec9").scale, 2);
  EXPECT_TRUE(col("li").is_list);
  EXPECT_EQ(col("li").path, "li.list.item");
  EXPECT_EQ(col("li").max_def, 3);
  EXPECT_EQ(col("li").max_rep, 1);
  EXPECT_EQ(col("li_req").max_def, 2);
  EXPECT_EQ(col("req_i32").max_def, 0);
  EXPECT_FALSE(col("req_i32").nullable);
  EXPECT_EQ(f.FindColumn("nope"), -1);
  EXPECT_EQ(f.num_row_groups(), 3);
}

TEST(ParquetFixtures, NestedColumnsAreRefusedByNameOthersRead) {
  auto file = ParquetFile::Open(FixtureDir() + "/nested_refused.parquet");
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> names;
  for (const ColumnDescriptor& c : (*file)->columns()) names.push_back(c.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"id", "st.a", "st.b", "ll.list.item.list.item", "tail"}));
  ColumnData data;
  for (int col : {1, 2, 3}) {
    absl::Status st = (*file)->ReadColumn(0, col, &data);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_NE(st.message().find(col == 3 ? "\"ll\" is a list of lists" : "\"st\" is a struct"),
              std::string::npos)
        << st;
  }
  EXPECT_TRUE((*file)->ReadColumn(0, 4, &data).ok());
}

TEST(ParquetFixtures, FileWithoutRowsHasColumnsAndNoRowGroups) {
  auto file = ParquetFile::Open(FixtureDir() + "/empty.parquet");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->num_rows(), 0);
  EXPECT_EQ((*file)->columns().size(), 3u);
  ColumnData data;
  EXPECT_EQ((*file)->ReadColumn(0, 0, &data).code(), absl::StatusCode::kInvalidArgument);
}

// What the fixtures hold, read from their page headers and footers, so that
// the claims of the tests above stay true when the fixtures are rewritten.
TEST(ParquetFixtures, CoverEveryEncodingCodecAndPageVersion) {
  std::set<int32_t> data_encodings, page_types, codecs;
  int most_pages = 0;
  bool dictionary_fallback = false;
  for (const Fixture& f : ListFixtures()) {
    const std::string bytes = ReadFileBytes(FixtureDir() + "/" + f.file + ".parquet");
    auto file = ParquetFile::FromBuffer(bytes, f.file);
    ASSERT_TRUE(file.ok()) << file.status();
    uint32_t footer_len;
    std::memcpy(&footer_len, bytes.data() + bytes.size() - 8, 4);
    auto md = DecodeFileMetaData(
        std::string_view(bytes).substr(bytes.size() - 8 - footer_len, footer_len));
    ASSERT_TRUE(md.ok()) << md.status();
    for (const RowGroup& rg : md->row_groups) {
      for (const ColumnChunk& c : rg.columns) codecs.insert(c.meta_data.codec);
    }
    for (int rg = 0; rg < (*file)->num_row_groups(); ++rg) {
      for (size_t col = 0; col < (*file)->columns().size(); ++col) {
        const auto range = (*file)->chunk_range(rg, static_cast<int>(col));
        const auto pages =
            testing::ChunkPages(std::string_view(bytes).substr(range.offset, range.size));
        int data_pages = 0;
        bool dict = false, plain = false;
        for (const auto& [type, encoding] : pages) {
          page_types.insert(type);
          if (type == 2) continue;
          ++data_pages;
          data_encodings.insert(encoding);
          dict |= encoding == 8;
          plain |= encoding != 8;
        }
        most_pages = std::max(most_pages, data_pages);
        dictionary_fallback |= dict && plain;
      }
    }
  }
  EXPECT_EQ(page_types, (std::set<int32_t>{0, 2, 3}));
  EXPECT_EQ(data_encodings, (std::set<int32_t>{0, 3, 5, 6, 7, 8, 9}));
  EXPECT_EQ(codecs, (std::set<int32_t>{0, 1, 2, 4, 6, 7}));
  EXPECT_GE(most_pages, 3);
  EXPECT_TRUE(dictionary_fallback);
}

// Only the asked chunk is read: every other chunk's bytes are destroyed.
TEST(ParquetFixtures, ProjectionReadsOnlyTheAskedChunk) {
  const std::string path = FixtureDir() + "/types_v1_dict_snappy.parquet";
  std::string bytes = ReadFileBytes(path);
  auto original = ParquetFile::FromBuffer(bytes, "original");
  ASSERT_TRUE(original.ok());
  const int target = (*original)->FindColumn("s");
  const nlohmann::json want = ReadAllRows(**original, target);
  for (int rg = 0; rg < (*original)->num_row_groups(); ++rg) {
    for (size_t col = 0; col < (*original)->columns().size(); ++col) {
      if (static_cast<int>(col) == target) continue;
      const auto range = (*original)->chunk_range(rg, static_cast<int>(col));
      std::fill(bytes.begin() + range.offset, bytes.begin() + range.offset + range.size, '\xff');
    }
  }
  auto damaged = ParquetFile::FromBuffer(bytes, "damaged");
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_EQ(ReadAllRows(**damaged, target), want);
  ColumnData data;
  EXPECT_FALSE((*damaged)->ReadColumn(0, (*damaged)->FindColumn("i64"), &data).ok());
}

}  // namespace
}  // namespace pstrain::parquet
