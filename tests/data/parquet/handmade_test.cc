// Files built page by page (parquet_builder.h) for what the fixture writers
// do not produce: INT96, legacy list shapes, page checksums, refused codecs
// and encodings, and headers whose counts lie.
#include <gtest/gtest.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <string>
#include <vector>

#include "data/parquet/parquet_file.h"
#include "tests/data/parquet/parquet_builder.h"

namespace pstrain::parquet {
namespace {

using testing::BuildFile;
using testing::Le32;
using testing::PlainInt64;
using testing::RleRun;
using testing::TestChunk;
using testing::TestPage;
using testing::TestSchemaElement;
using testing::ThriftWriter;

constexpr int32_t kInt32 = 1, kInt64 = 2, kInt96 = 3, kByteArray = 6;
constexpr int32_t kRequired = 0, kOptional = 1, kRepeated = 2;

// A file of one required column "x" of `type` in one row group of `rows`
// rows (default: num_values).
std::string OneColumn(std::vector<TestPage> pages, int64_t num_values, int32_t codec = 0,
                      int32_t type = kInt64, int64_t rows = -1) {
  TestChunk chunk{codec, num_values, std::move(pages), "x", type};
  return BuildFile({{"x", type, kRequired}}, {chunk}, rows >= 0 ? rows : num_values);
}

TestPage PlainPage(const std::vector<int64_t>& values) {
  TestPage p;
  p.body = PlainInt64(values);
  p.num_values = static_cast<int32_t>(values.size());
  return p;
}

// Reads column 0 of row group 0.
absl::Status ReadX(const std::string& bytes, ColumnData* data, const ReadOptions& options = {}) {
  auto file = ParquetFile::FromBuffer(bytes, "mem.parquet", options);
  if (!file.ok()) return file.status();
  return (*file)->ReadColumn(0, 0, data);
}

uint32_t Crc(const std::string& s) {
  return static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

std::vector<int64_t> Ints(const ColumnData& d) {
  return std::vector<int64_t>(d.ints.begin(), d.ints.begin() + d.num_values);
}

TEST(ParquetHandmade, PlainInt64PageReads) {
  ColumnData data;
  ASSERT_TRUE(ReadX(OneColumn({PlainPage({1, -2, 3})}, 3), &data).ok());
  EXPECT_EQ(data.num_rows, 3);
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(data.row_valid, (PodVector<uint8_t>{1, 1, 1}));
}

TEST(ParquetHandmade, Int96IsConvertedToNanosecondsSinceTheEpoch) {
  // 2000-01-01 00:00:00.000000123: Julian day 2451545, 123 ns into the day.
  std::string value(12, '\0');
  const uint64_t nanos = 123;
  const uint32_t day = 2451545;
  std::memcpy(value.data(), &nanos, 8);
  std::memcpy(value.data() + 8, &day, 4);
  TestPage p;
  p.body = value;
  p.num_values = 1;
  ColumnData data;
  const std::string file = OneColumn({p}, 1, 0, kInt96);
  ASSERT_TRUE(ReadX(file, &data).ok());
  EXPECT_EQ(data.ints[0], 946684800000000000 + 123);
  auto f = ParquetFile::FromBuffer(file, "mem");
  EXPECT_EQ((*f)->columns()[0].logical, LogicalKind::kTimestampNanos);
}

// Rows [1, 2], null, [], [3] of `optional group tags (LIST) { repeated int32
// array }` (the legacy 2-level form).
TEST(ParquetHandmade, LegacyTwoLevelListGivesNullAndEmptyLists) {
  TestPage p;
  // Levels bit-packed, one group of 8: rep 0 1 0 0 0, def 2 2 0 1 2.
  const std::string rep = std::string("\x03\x02", 2);
  const std::string def = std::string("\x03\x4a\x02", 3);
  const int32_t values[] = {1, 2, 3};
  p.body = Le32(rep.size()) + rep + Le32(def.size()) + def +
           std::string(reinterpret_cast<const char*>(values), sizeof(values));
  p.num_values = 5;
  TestChunk chunk{0, 5, {p}, "tags.array", kInt32};
  const std::string file =
      BuildFile({{"tags", -1, kOptional, 1, /*LIST*/ 3}, {"array", kInt32, kRepeated}}, {chunk}, 4);
  auto f = ParquetFile::FromBuffer(file, "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  const ColumnDescriptor& c = (*f)->columns()[0];
  EXPECT_EQ(c.name, "tags");
  EXPECT_TRUE(c.is_list);
  EXPECT_EQ(c.max_def, 2);
  ColumnData data;
  ASSERT_TRUE((*f)->ReadColumn(0, 0, &data).ok());
  EXPECT_EQ(data.num_rows, 4);
  EXPECT_EQ(data.row_valid, (PodVector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(data.list_offsets, (std::vector<uint32_t>{0, 2, 2, 2, 3}));
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(data.value_valid, (PodVector<uint8_t>{1, 1, 1}));
}

// A top-level `repeated int64 x`: rows [5, 6], [], [7]; never null.
TEST(ParquetHandmade, RepeatedPrimitiveIsAListOfRequiredValues) {
  TestPage p;
  const std::string rep = std::string("\x03\x02", 2);  // 0 1 0 0
  const std::string def = std::string("\x03\x0b", 2);  // 1 1 0 1
  p.body = Le32(rep.size()) + rep + Le32(def.size()) + def + PlainInt64({5, 6, 7});
  p.num_values = 4;
  TestChunk chunk{0, 4, {p}, "x", kInt64};
  auto f = ParquetFile::FromBuffer(BuildFile({{"x", kInt64, kRepeated}}, {chunk}, 3), "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  ColumnData data;
  ASSERT_TRUE((*f)->ReadColumn(0, 0, &data).ok());
  EXPECT_EQ(data.row_valid, (PodVector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(data.list_offsets, (std::vector<uint32_t>{0, 2, 2, 3}));
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{5, 6, 7}));
}

TEST(ParquetHandmade, PlainDictionaryEncodedPageReads) {
  TestPage dict = PlainPage({100, 200});
  dict.type = 2;
  TestPage page;
  page.body = std::string("\x01", 1) + RleRun(3, 1, 1);  // bit width 1, index 1 x3
  page.num_values = 3;
  page.encoding = 2;  // PLAIN_DICTIONARY
  ColumnData data;
  ASSERT_TRUE(ReadX(OneColumn({dict, page}, 3), &data).ok());
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{200, 200, 200}));
}

// A v2 page may leave its values uncompressed in a SNAPPY chunk; its
// definition levels come before them, never compressed.
TEST(ParquetHandmade, DataPageV2WithUncompressedValuesInACompressedChunk) {
  const std::string def = RleRun(1, 1, 1) + RleRun(1, 0, 1) + RleRun(1, 1, 1);  // 1 0 1
  TestPage p;
  p.type = 3;
  p.body = def + PlainInt64({4, 6});
  p.num_values = 3;
  p.num_nulls = 1;
  p.num_rows = 3;
  p.def_length = static_cast<int32_t>(def.size());
  p.is_compressed = false;
  TestChunk chunk{/*SNAPPY*/ 1, 3, {p}, "x", kInt64};
  auto f = ParquetFile::FromBuffer(BuildFile({{"x", kInt64, kOptional}}, {chunk}, 3), "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  ColumnData data;
  ASSERT_TRUE((*f)->ReadColumn(0, 0, &data).ok());
  EXPECT_EQ(data.row_valid, (PodVector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{4, 0, 6}));
}

TEST(ParquetHandmade, PageWithChecksumIsVerified) {
  TestPage p = PlainPage({7, 8, 9});
  p.crc = Crc(p.body);
  ColumnData data;
  ASSERT_TRUE(ReadX(OneColumn({p}, 3), &data).ok());
  EXPECT_EQ(Ints(data), (std::vector<int64_t>{7, 8, 9}));

  p.body[9] ^= 0x40;  // the second value
  absl::Status st = ReadX(OneColumn({p}, 3), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st;
  // The error says where: file, row group, column, page and its byte.
  EXPECT_EQ(st.message().rfind("mem.parquet: row group 0, column \"x\", page 0 at byte 4: ", 0), 0u)
      << st;

  ReadOptions no_check;
  no_check.verify_checksums = false;
  ASSERT_TRUE(ReadX(OneColumn({p}, 3), &data, no_check).ok());
  EXPECT_EQ(data.ints[1], 8 ^ (0x40 << 8));
}

TEST(ParquetHandmade, CorruptSnappyPageIsAnError) {
  const std::string plain = PlainInt64({1, 2, 3, 4, 5, 6, 7, 8});
  std::string packed(snappy_max_compressed_length(plain.size()), '\0');
  size_t len = packed.size();
  ASSERT_EQ(snappy_compress(plain.data(), plain.size(), packed.data(), &len), SNAPPY_OK);
  packed.resize(len);
  TestPage p;
  p.body = packed;
  p.uncompressed_size = static_cast<int32_t>(plain.size());
  p.num_values = 8;
  ColumnData data;
  ASSERT_TRUE(ReadX(OneColumn({p}, 8, /*SNAPPY*/ 1), &data).ok());
  EXPECT_EQ(data.ints[7], 8);

  p.body = packed.substr(0, packed.size() - 3);  // cut short
  absl::Status st = ReadX(OneColumn({p}, 8, 1), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("snappy data is corrupt"), std::string::npos) << st;

  p.body = packed;
  p.uncompressed_size = 80;  // the header lies about the size
  st = ReadX(OneColumn({p}, 8, 1), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("snappy"), std::string::npos) << st;
}

TEST(ParquetHandmade, CorruptZstdPageIsAnError) {
  const std::string plain = PlainInt64({10, 20, 30, 40});
  std::string packed(ZSTD_compressBound(plain.size()), '\0');
  packed.resize(ZSTD_compress(packed.data(), packed.size(), plain.data(), plain.size(), 3));
  TestPage p;
  p.body = packed;
  p.uncompressed_size = static_cast<int32_t>(plain.size());
  p.num_values = 4;
  ColumnData data;
  ASSERT_TRUE(ReadX(OneColumn({p}, 4, /*ZSTD*/ 6), &data).ok());
  EXPECT_EQ(data.ints[3], 40);
  p.body[packed.size() / 2] ^= 0x55;
  p.body[packed.size() / 2 + 1] ^= 0x55;
  p.body[0] ^= 1;  // the frame's magic
  absl::Status st = ReadX(OneColumn({p}, 4, 6), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("zstd data is corrupt"), std::string::npos) << st;
}

TEST(ParquetHandmade, LzoAndHadoopLz4AreRefusedByName) {
  ColumnData data;
  absl::Status st = ReadX(OneColumn({PlainPage({1})}, 1, /*LZO*/ 3), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("column \"x\": LZO compression is not supported"), std::string::npos)
      << st;
  st = ReadX(OneColumn({PlainPage({1})}, 1, /*LZ4*/ 5), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("LZ4 compression"), std::string::npos) << st;
  st = ReadX(OneColumn({PlainPage({1})}, 1, 42), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
}

TEST(ParquetHandmade, BitPackedLevelsAreRefused) {
  TestPage p = PlainPage({1});
  p.body = Le32(2) + RleRun(1, 1, 1) + p.body;
  p.def_encoding = 4;  // BIT_PACKED
  p.num_values = 1;
  TestChunk chunk{0, 1, {p}, "x", kInt64};
  auto f = ParquetFile::FromBuffer(BuildFile({{"x", kInt64, kOptional}}, {chunk}, 1), "mem");
  ASSERT_TRUE(f.ok());
  ColumnData data;
  absl::Status st = (*f)->ReadColumn(0, 0, &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("BIT_PACKED"), std::string::npos) << st;
}

TEST(ParquetHandmade, PageClaimingMoreValuesThanTheChunkIsAnError) {
  TestPage p = PlainPage({1, 2});
  p.num_values = INT32_MAX;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({p}, 2), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("page of 2147483647 values"), std::string::npos) << st;
}

TEST(ParquetHandmade, PageOverTheValueLimitIsRefused) {
  ReadOptions options;
  options.max_page_values = 2;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({PlainPage({1, 2, 3})}, 3), &data, options);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
}

TEST(ParquetHandmade, HugeUncompressedPageSizeIsRefusedBeforeAllocating) {
  TestPage p = PlainPage({1});
  p.uncompressed_size = INT32_MAX;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({p}, 1, /*SNAPPY*/ 1), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("2147483647 uncompressed bytes"), std::string::npos) << st;
}

TEST(ParquetHandmade, DeltaHeaderClaimingTwoToTheFortyValuesIsAnError) {
  // DELTA_LENGTH_BYTE_ARRAY of one value whose lengths claim 2^40 values.
  ThriftWriter w;
  w.Varint(128);
  w.Varint(4);
  w.Varint(uint64_t{1} << 40);
  w.Varint(ThriftWriter::ZigZag(1));
  TestPage p;
  p.body = w.bytes() + "a";
  p.num_values = 1;
  p.encoding = 6;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({p}, 1, 0, kByteArray), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("claims 1099511627776 values"), std::string::npos) << st;
}

TEST(ParquetHandmade, DictionaryClaimingMoreEntriesThanItsPageHoldsIsAnError) {
  TestPage dict = PlainPage({1, 2});
  dict.type = 2;
  dict.num_values = 1 << 30;
  TestPage page;
  page.body = std::string("\x01", 1) + RleRun(1, 0, 1);
  page.num_values = 1;
  page.encoding = 8;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({dict, page}, 1), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("1073741824 values do not fit in 16 bytes"), std::string::npos) << st;
}

TEST(ParquetHandmade, DictionaryIndexOutOfRangeIsAnError) {
  TestPage dict = PlainPage({1, 2});
  dict.type = 2;
  TestPage page;
  page.body = std::string("\x02", 1) + RleRun(1, 3, 2);
  page.num_values = 1;
  page.encoding = 8;
  ColumnData data;
  absl::Status st = ReadX(OneColumn({dict, page}, 1), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("dictionary index 3 out of range"), std::string::npos) << st;
}

TEST(ParquetHandmade, ChunkWithFewerRowsThanItsRowGroupIsAnError) {
  ColumnData data;
  absl::Status st = ReadX(OneColumn({PlainPage({1, 2})}, 2, 0, kInt64, /*rows=*/5), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

TEST(ParquetHandmade, FooterListClaimingHugeCountIsAnError) {
  ThriftWriter w;
  w.BeginStruct();
  w.I32(1, 1);
  w.List(2, ThriftWriter::kStruct, uint64_t{1} << 30);
  const std::string footer = w.bytes() + std::string(16, '\0');
  const std::string file = "PAR1" + footer + Le32(footer.size()) + "PAR1";
  auto f = ParquetFile::FromBuffer(file, "mem");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("thrift list of 1073741824 elements"), std::string::npos)
      << f.status();
}

}  // namespace
}  // namespace pstrain::parquet
