// The dictionary form of byte-string chunks (ReadOptions::keep_dictionary):
// a chunk read as indices plus its dictionary holds the same values as read
// as strings, on hand-made chunks (nulls, lists, a fall back to PLAIN pages
// mid-chunk) and on every fixture; corrupt indices are errors.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/parquet/parquet_file.h"
#include "data/parquet/value_decoder.h"
#include "tests/data/parquet/parquet_builder.h"
#include "tests/data/parquet/parquet_test_util.h"

namespace pstrain::parquet {
namespace {

using testing::BuildFile;
using testing::FixtureDir;
using testing::Le32;
using testing::ReadFileBytes;
using testing::RleRun;
using testing::TestChunk;
using testing::TestPage;

constexpr int32_t kByteArray = 6;
constexpr int32_t kOptional = 1, kRepeated = 2;
constexpr int32_t kPlain = 0, kPlainDictionary = 2, kRleDictionary = 8;

std::string PlainStrings(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += Le32(static_cast<uint32_t>(v.size())) + v;
  return out;
}

TestPage DictionaryPage(const std::vector<std::string>& entries) {
  TestPage p;
  p.type = 2;
  p.body = PlainStrings(entries);
  p.num_values = static_cast<int32_t>(entries.size());
  p.encoding = kPlainDictionary;
  return p;
}

// A v1 page of an optional column: definition levels (bit width 1), then
// `values` in `encoding`.
TestPage OptionalPage(const std::string& def, int32_t num_values, int32_t encoding,
                      const std::string& values) {
  TestPage p;
  p.body = Le32(static_cast<uint32_t>(def.size())) + def + values;
  p.num_values = num_values;
  p.encoding = encoding;
  return p;
}

// A file of one optional BYTE_ARRAY column "s".
std::string OptionalStrings(std::vector<TestPage> pages, int64_t rows) {
  TestChunk chunk{0, rows, std::move(pages), "s", kByteArray};
  return BuildFile({{"s", kByteArray, kOptional}}, {chunk}, rows);
}

ReadOptions KeepDictionary() {
  ReadOptions options;
  options.keep_dictionary = true;
  return options;
}

// Column `col` of row group `rg` of `bytes`, read with `options`.
absl::Status Read(const std::string& bytes, const ReadOptions& options, ColumnData* data,
                  int rg = 0, int col = 0) {
  auto file = ParquetFile::FromBuffer(bytes, "mem.parquet", options);
  if (!file.ok()) return file.status();
  return (*file)->ReadColumn(rg, col, data);
}

// Every slot's validity and bytes, and the row structure, are equal.
void ExpectSameValues(const ColumnData& strings, const ColumnData& dict, const std::string& what) {
  ASSERT_EQ(strings.num_rows, dict.num_rows) << what;
  ASSERT_EQ(strings.num_values, dict.num_values) << what;
  EXPECT_EQ(strings.row_valid, dict.row_valid) << what;
  EXPECT_EQ(strings.list_offsets, dict.list_offsets) << what;
  EXPECT_EQ(strings.value_valid, dict.value_valid) << what;
  EXPECT_FALSE(strings.dictionary_encoded) << what;
  if (dict.dictionary_encoded) {
    EXPECT_TRUE(dict.str_offsets.empty()) << what;
    EXPECT_TRUE(dict.arena.empty()) << what;
    ASSERT_EQ(dict.dict_index.size(), static_cast<size_t>(dict.num_values)) << what;
    ASSERT_EQ(dict.dict_offsets.size(), static_cast<size_t>(dict.dict_size() + 2)) << what;
    EXPECT_EQ(dict.dict_offsets.back(), dict.dict_arena.size()) << what;
    EXPECT_TRUE(dict.dict_entry(dict.dict_size()).empty()) << what;
  }
  for (int64_t i = 0; i < strings.num_values; ++i) {
    ASSERT_EQ(strings.valid(i), dict.valid(i)) << what << " slot " << i;
    if (dict.dictionary_encoded) {
      ASSERT_LE(dict.dict_index[static_cast<size_t>(i)], dict.dict_size()) << what;
      if (!dict.valid(i)) {
        EXPECT_EQ(dict.dict_index[static_cast<size_t>(i)], dict.dict_size()) << what;
      }
    }
    ASSERT_EQ(strings.bytes(i), dict.bytes(i)) << what << " slot " << i;
  }
}

TEST(ParquetDictionaryForm, NullableChunkReadsAsIndicesWithTheSameValues) {
  // Rows "kiwi", null, "apple", "", null; the dictionary holds an empty entry.
  const std::string def = RleRun(1, 1, 1) + RleRun(1, 0, 1) + RleRun(2, 1, 1) + RleRun(1, 0, 1);
  const std::string indices = "\x02" + RleRun(1, 2, 2) + RleRun(1, 0, 2) + RleRun(1, 1, 2);
  const std::string file = OptionalStrings(
      {DictionaryPage({"apple", "", "kiwi"}), OptionalPage(def, 5, kRleDictionary, indices)}, 5);
  ColumnData strings, dict;
  ASSERT_TRUE(Read(file, {}, &strings).ok());
  ASSERT_TRUE(Read(file, KeepDictionary(), &dict).ok());
  EXPECT_FALSE(strings.dictionary_encoded);
  ASSERT_TRUE(dict.dictionary_encoded);
  EXPECT_EQ(dict.dict_size(), 3);
  EXPECT_EQ(dict.dict_index, (PodVector<uint32_t>{2, 3, 0, 1, 3}));
  EXPECT_EQ(dict.bytes(0), "kiwi");
  EXPECT_EQ(dict.bytes(2), "apple");
  ExpectSameValues(strings, dict, "nullable");
}

TEST(ParquetDictionaryForm, ListColumnReadsAsIndices) {
  // `repeated binary x`: rows ["a", "b"], [], ["a"].
  TestPage p;
  const std::string rep = std::string("\x03\x02", 2);  // 0 1 0 0
  const std::string def = std::string("\x03\x0b", 2);  // 1 1 0 1
  p.body = Le32(rep.size()) + rep + Le32(def.size()) + def + "\x01" + RleRun(1, 0, 1) +
           RleRun(1, 1, 1) + RleRun(1, 0, 1);
  p.num_values = 4;
  p.encoding = kRleDictionary;
  TestChunk chunk{0, 4, {DictionaryPage({"a", "b"}), p}, "x", kByteArray};
  const std::string file = BuildFile({{"x", kByteArray, kRepeated}}, {chunk}, 3);
  ColumnData strings, dict;
  ASSERT_TRUE(Read(file, {}, &strings).ok());
  ASSERT_TRUE(Read(file, KeepDictionary(), &dict).ok());
  ASSERT_TRUE(dict.dictionary_encoded);
  EXPECT_EQ(dict.list_offsets, (std::vector<uint32_t>{0, 2, 2, 3}));
  EXPECT_EQ(dict.dict_index, (PodVector<uint32_t>{0, 1, 0}));
  ExpectSameValues(strings, dict, "list");
}

// Writers fall back to PLAIN pages when the dictionary grows too large: the
// slots read as indices so far become strings, and later pages (PLAIN, or
// dictionary-encoded again) append strings.
TEST(ParquetDictionaryForm, ChunkFallingBackToPlainPagesMidChunkReadsAsStrings) {
  const std::string def1 = RleRun(1, 1, 1) + RleRun(1, 0, 1) + RleRun(1, 1, 1);
  const std::string idx1 = "\x01" + RleRun(1, 1, 1) + RleRun(1, 0, 1);
  const std::string def2 = RleRun(1, 0, 1) + RleRun(2, 1, 1);
  const std::string def3 = RleRun(1, 1, 1);
  const std::string idx3 = "\x01" + RleRun(1, 1, 1);
  const std::string file =
      OptionalStrings({DictionaryPage({"x", "yy"}), OptionalPage(def1, 3, kRleDictionary, idx1),
                       OptionalPage(def2, 3, kPlain, PlainStrings({"pear", ""})),
                       OptionalPage(def3, 1, kPlainDictionary, idx3)},
                      7);
  ColumnData strings, dict;
  ASSERT_TRUE(Read(file, {}, &strings).ok());
  ASSERT_TRUE(Read(file, KeepDictionary(), &dict).ok());
  EXPECT_FALSE(dict.dictionary_encoded);
  EXPECT_TRUE(dict.dict_index.empty());
  const std::vector<std::string> want = {"yy", "", "x", "", "pear", "", "yy"};
  const PodVector<uint8_t> valid = {1, 0, 1, 0, 1, 1, 1};
  EXPECT_EQ(dict.row_valid, valid);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(dict.bytes(i), want[static_cast<size_t>(i)]) << i;
  ExpectSameValues(strings, dict, "fallback");
  ASSERT_EQ(dict.str_offsets.size(), 8u);
  EXPECT_EQ(dict.str_offsets.back(), dict.arena.size());
}

TEST(ParquetDictionaryForm, ChunkWithoutADictionaryReadsAsStrings) {
  const std::string def = RleRun(2, 1, 1);
  const std::string file =
      OptionalStrings({OptionalPage(def, 2, kPlain, PlainStrings({"a", "bc"}))}, 2);
  ColumnData data;
  ASSERT_TRUE(Read(file, KeepDictionary(), &data).ok());
  EXPECT_FALSE(data.dictionary_encoded);
  EXPECT_EQ(data.bytes(1), "bc");
}

// One ColumnData read chunk after chunk, in both forms in turn: nothing of
// an earlier chunk's form stays behind.
TEST(ParquetDictionaryForm, ReusedColumnDataSwitchesForms) {
  const std::string def = RleRun(2, 1, 1);
  const std::string dict_file = OptionalStrings(
      {DictionaryPage({"p", "q"}), OptionalPage(def, 2, kRleDictionary, "\x01" + RleRun(2, 1, 1))},
      2);
  const std::string plain_file =
      OptionalStrings({OptionalPage(def, 2, kPlain, PlainStrings({"a", "bc"}))}, 2);
  ColumnData data;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(Read(dict_file, KeepDictionary(), &data).ok());
    ASSERT_TRUE(data.dictionary_encoded);
    EXPECT_EQ(data.bytes(0), "q");
    ASSERT_TRUE(Read(plain_file, KeepDictionary(), &data).ok());
    ASSERT_FALSE(data.dictionary_encoded);
    EXPECT_EQ(data.bytes(0), "a");
    EXPECT_EQ(data.bytes(1), "bc");
  }
}

TEST(ParquetDictionaryForm, IndexPastTheDictionaryIsDataLoss) {
  const std::string def = RleRun(1, 1, 1);
  const std::string file = OptionalStrings(
      {DictionaryPage({"a", "b"}), OptionalPage(def, 1, kRleDictionary, "\x02" + RleRun(1, 2, 2))},
      1);
  ColumnData data;
  absl::Status st = Read(file, KeepDictionary(), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("dictionary index 2 out of range (the dictionary has 2 entries)"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find("page 1"), std::string::npos) << st;
}

TEST(ParquetDictionaryForm, TruncatedIndicesAreDataLoss) {
  // 5 rows; a bit-packed group of 8 2-bit indices needs 2 bytes, has 1; then
  // a page whose values section is empty.
  const std::string def = RleRun(5, 1, 1);
  for (const std::string& values : {std::string("\x02\x03\xff", 3), std::string()}) {
    const std::string file = OptionalStrings(
        {DictionaryPage({"a", "b", "c", "d"}), OptionalPage(def, 5, kRleDictionary, values)}, 5);
    ColumnData data;
    absl::Status st = Read(file, KeepDictionary(), &data);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  }
}

TEST(ParquetDictionaryForm, DictionaryEncodedPageWithoutADictionaryIsDataLoss) {
  const std::string def = RleRun(1, 1, 1);
  const std::string file =
      OptionalStrings({OptionalPage(def, 1, kRleDictionary, "\x01" + RleRun(1, 0, 1))}, 1);
  ColumnData data;
  absl::Status st = Read(file, KeepDictionary(), &data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("without a dictionary page"), std::string::npos) << st;
}

TEST(DictionaryIndices, DecodeChecksEachIndexAndTheData) {
  PodVector<uint32_t> out = {7};
  // Bit width 2: RLE run of 3 x 1, then a bit-packed group 0..3 x 2.
  const std::string data = "\x02" + RleRun(3, 1, 2) + std::string("\x03\xe4\xe4", 3);
  ASSERT_TRUE(DecodeDictionaryIndices(data, 11, 4, &out).ok());
  EXPECT_EQ(out, (PodVector<uint32_t>{7, 1, 1, 1, 0, 1, 2, 3, 0, 1, 2, 3}));
  absl::Status st = DecodeDictionaryIndices(data, 11, 3, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("dictionary index 3 out of range"), std::string::npos) << st;
  EXPECT_EQ(DecodeDictionaryIndices(data, 12, 4, &out).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDictionaryIndices("", 1, 4, &out).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDictionaryIndices("\x21" + RleRun(1, 0, 32), 1, 4, &out).code(),
            absl::StatusCode::kDataLoss);  // bit width 33
  // An empty dictionary takes no index.
  EXPECT_EQ(DecodeDictionaryIndices(std::string(1, '\0') + RleRun(1, 0, 0), 1, 0, &out).code(),
            absl::StatusCode::kDataLoss);
}

// The .parquet files of a folder.
std::vector<std::string> ParquetFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 8 && name.substr(name.size() - 8) == ".parquet") {
      files.push_back(dir + "/" + name);
    }
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

// Every chunk of every fixture (the writers' dictionary files among them)
// reads to the same values in both forms.
TEST(ParquetDictionaryForm, EveryFixtureChunkReadsTheSameInBothForms) {
  std::vector<std::string> files = ParquetFiles(FixtureDir());
  for (const std::string& f : ParquetFiles(FixtureDir() + "/../same_rows")) files.push_back(f);
  ASSERT_GT(files.size(), 10u);
  int dictionary_chunks = 0;
  for (const std::string& path : files) {
    const std::string bytes = ReadFileBytes(path);
    auto plain = ParquetFile::FromBuffer(bytes, path);
    auto keep = ParquetFile::FromBuffer(bytes, path, KeepDictionary());
    ASSERT_EQ(plain.ok(), keep.ok()) << path;
    if (!plain.ok()) continue;
    ColumnData strings, dict;
    for (int rg = 0; rg < (*plain)->num_row_groups(); ++rg) {
      for (size_t col = 0; col < (*plain)->columns().size(); ++col) {
        const absl::Status a = (*plain)->ReadColumn(rg, static_cast<int>(col), &strings);
        const absl::Status b = (*keep)->ReadColumn(rg, static_cast<int>(col), &dict);
        ASSERT_EQ(a.code(), b.code()) << path << " " << a << " / " << b;
        if (!a.ok()) continue;
        const ColumnDescriptor& c = (*plain)->columns()[col];
        if (c.type != PhysicalType::kByteArray && c.type != PhysicalType::kFixedLenByteArray) {
          EXPECT_FALSE(dict.dictionary_encoded);
          continue;
        }
        dictionary_chunks += dict.dictionary_encoded;
        ExpectSameValues(strings, dict, path + " column " + c.name);
      }
    }
  }
  EXPECT_GT(dictionary_chunks, 10);
}

}  // namespace
}  // namespace pstrain::parquet
