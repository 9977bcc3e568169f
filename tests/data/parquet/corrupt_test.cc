// Damaged files: every prefix, every footer truncation, every flipped byte
// and random overwrites of real fixtures give an error or valid data, never
// a crash; bad magic and a footer length past the file are DataLoss naming
// the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "data/parquet/parquet_file.h"
#include "tests/data/parquet/parquet_test_util.h"

namespace pstrain::parquet {
namespace {

using testing::FixtureDir;
using testing::ReadFileBytes;

std::string Fixture(const std::string& name) {
  std::string bytes = ReadFileBytes(FixtureDir() + "/" + name + ".parquet");
  EXPECT_GT(bytes.size(), 100u) << name;
  return bytes;
}

// The codes a damaged file may give.
bool Expected(const absl::Status& st) {
  return st.ok() || st.code() == absl::StatusCode::kDataLoss ||
         st.code() == absl::StatusCode::kUnimplemented ||
         st.code() == absl::StatusCode::kResourceExhausted;
}

// Opens `bytes` and reads every column of every row group, with byte
// strings as such and in the dictionary form; the number of chunks read
// without error. Small limits keep a lying header cheap.
int ReadEverything(const std::string& bytes) {
  ReadOptions options;
  options.max_page_bytes = 1 << 24;
  options.max_page_values = 1 << 20;
  options.max_chunk_values = 1 << 22;
  auto file = ParquetFile::FromBuffer(bytes, "damaged.parquet", options);
  EXPECT_TRUE(Expected(file.status())) << file.status();
  if (!file.ok()) return 0;
  options.keep_dictionary = true;
  auto keep = ParquetFile::FromBuffer(bytes, "damaged.parquet", options);
  EXPECT_TRUE(keep.ok()) << keep.status();
  if (!keep.ok()) return 0;
  int good = 0;
  ColumnData data, dict;
  for (int rg = 0; rg < (*file)->num_row_groups(); ++rg) {
    for (size_t col = 0; col < (*file)->columns().size(); ++col) {
      absl::Status st = (*file)->ReadColumn(rg, static_cast<int>(col), &data);
      EXPECT_TRUE(Expected(st)) << st;
      absl::Status dict_st = (*keep)->ReadColumn(rg, static_cast<int>(col), &dict);
      EXPECT_TRUE(Expected(dict_st)) << dict_st;
      if (st.ok() && dict_st.ok()) {
        // Both forms hold the same values.
        EXPECT_EQ(data.num_values, dict.num_values);
        EXPECT_EQ(data.row_valid, dict.row_valid);
        if (dict.dictionary_encoded) {
          EXPECT_EQ(dict.dict_index.size(), static_cast<size_t>(dict.num_values));
          EXPECT_EQ(dict.dict_offsets.back(), dict.dict_arena.size());
          for (uint32_t k : dict.dict_index) EXPECT_LE(k, dict.dict_size());
        }
        const PhysicalType type = (*file)->columns()[col].type;
        if (type == PhysicalType::kByteArray || type == PhysicalType::kFixedLenByteArray) {
          for (int64_t i = 0; i < std::min(data.num_values, dict.num_values); ++i) {
            EXPECT_EQ(data.bytes(i), dict.bytes(i)) << "slot " << i;
          }
        }
      }
      if (!st.ok()) continue;
      ++good;
      // What a reader of the data relies on.
      EXPECT_EQ(data.row_valid.size(), static_cast<size_t>(data.num_rows));
      if ((*file)->columns()[col].is_list) {
        EXPECT_EQ(data.list_offsets.size(), static_cast<size_t>(data.num_rows + 1));
        EXPECT_EQ(data.list_offsets.back(), data.num_values);
      }
      if (data.str_offsets.size() > 1) {
        EXPECT_EQ(data.str_offsets.size(), static_cast<size_t>(data.num_values + 1));
        EXPECT_EQ(data.str_offsets.back(), data.arena.size());
      }
    }
  }
  return good;
}

TEST(ParquetCorrupt, EveryPrefixIsAnError) {
  const std::string bytes = Fixture("codec_snappy_v1");
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto file = ParquetFile::FromBuffer(bytes.substr(0, n), "cut.parquet");
    ASSERT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << n;
    ASSERT_EQ(file.status().message().rfind("cut.parquet: ", 0), 0u) << file.status();
  }
}

// The data, then the first n bytes of the footer as if they were all of it.
TEST(ParquetCorrupt, EveryFooterTruncationIsAnError) {
  const std::string bytes = Fixture("types_v2_dict_zstd");
  uint32_t footer_len;
  std::memcpy(&footer_len, bytes.data() + bytes.size() - 8, 4);
  const std::string data = bytes.substr(0, bytes.size() - 8 - footer_len);
  const std::string footer = bytes.substr(data.size(), footer_len);
  for (uint32_t n = 0; n < footer_len; ++n) {
    std::string cut = data + footer.substr(0, n);
    cut.append(reinterpret_cast<const char*>(&n), 4);
    cut += "PAR1";
    auto file = ParquetFile::FromBuffer(cut, "cut.parquet");
    ASSERT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << n;
  }
}

TEST(ParquetCorrupt, EveryFlippedByteIsAnErrorOrData) {
  for (const char* name : {"codec_snappy_v1", "codec_none_v2", "hyparquet_v2_snappy"}) {
    SCOPED_TRACE(name);
    const std::string bytes = Fixture(name);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string damaged = bytes;
      damaged[i] ^= static_cast<char>(1 << (i % 8));
      ReadEverything(damaged);
      if (::testing::Test::HasFailure()) FAIL() << "byte " << i;
    }
  }
}

TEST(ParquetCorrupt, RandomOverwritesAreErrorsOrData) {
  std::mt19937 rng(40);
  for (const char* name :
       {"types_v1_plain", "types_v2_dict_zstd", "types_v1_dict_snappy", "enc_delta",
        "enc_byte_stream_split", "codec_gzip_v2", "codec_brotli_v1", "codec_lz4raw_v2"}) {
    SCOPED_TRACE(name);
    const std::string bytes = Fixture(name);
    for (int iter = 0; iter < 300; ++iter) {
      std::string damaged = bytes;
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits; ++e) {
        // Mostly inside the data pages, sometimes the footer.
        damaged[rng() % damaged.size()] = static_cast<char>(rng());
      }
      ReadEverything(damaged);
      if (::testing::Test::HasFailure()) FAIL() << "iteration " << iter;
    }
  }
}

TEST(ParquetCorrupt, BadMagicIsDataLoss) {
  std::string bytes = Fixture("codec_none_v1");
  std::string tail = bytes;
  tail[tail.size() - 1] = '2';
  auto file = ParquetFile::FromBuffer(tail, "x.parquet");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(file.status().message(),
            "x.parquet: not a Parquet file (no \"PAR1\" magic at its end)");
  std::string head = bytes;
  head[0] = 'Q';
  file = ParquetFile::FromBuffer(head, "x.parquet");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find("magic at its start"), std::string::npos);
  std::string encrypted = bytes;
  encrypted.replace(encrypted.size() - 4, 4, "PARE");
  file = ParquetFile::FromBuffer(encrypted, "x.parquet");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ParquetCorrupt, FooterLengthLargerThanTheFileIsDataLoss) {
  std::string bytes = Fixture("codec_none_v1");
  const uint32_t len = static_cast<uint32_t>(bytes.size());
  std::memcpy(bytes.data() + bytes.size() - 8, &len, 4);
  auto file = ParquetFile::FromBuffer(bytes, "x.parquet");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find("footer length"), std::string::npos) << file.status();
}

TEST(ParquetCorrupt, TinyFilesAreDataLoss) {
  // The last: a footer of 0 bytes, without the required fields.
  for (const std::string& bytes : {std::string(), std::string("PAR1"), std::string("PAR1PAR1"),
                                   std::string("PAR1\0\0\0\0PAR1", 12)}) {
    auto file = ParquetFile::FromBuffer(bytes, "t");
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
  }
}

TEST(ParquetCorrupt, MissingFileIsNotFound) {
  auto file = ParquetFile::Open("/nonexistent/none.parquet");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
}

}  // namespace
}  // namespace pstrain::parquet
