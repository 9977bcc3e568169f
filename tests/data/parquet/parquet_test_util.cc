#include "tests/data/parquet/parquet_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "data/parquet/page_header.h"

namespace pstrain::parquet::testing {

std::string FixtureDir() {
  return std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/fixtures";
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

namespace {

std::string Int128ToString(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : v;
  std::string s;
  while (u > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  return negative ? "-" + s : s;
}

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s.push_back(kDigits[c >> 4]);
    s.push_back(kDigits[c & 15]);
  }
  return s;
}

}  // namespace

nlohmann::json CanonicalValue(const ColumnDescriptor& c, const ColumnData& data, int64_t slot) {
  if (!data.valid(slot)) return nullptr;
  switch (c.type) {
    case PhysicalType::kBoolean: return data.ints[slot] != 0;
    case PhysicalType::kInt32:
    case PhysicalType::kInt64:
    case PhysicalType::kInt96:
      if (c.logical == LogicalKind::kInt && !c.int_signed && c.type == PhysicalType::kInt64) {
        return std::to_string(static_cast<uint64_t>(data.ints[slot]));
      }
      return std::to_string(data.ints[slot]);
    case PhysicalType::kFloat:
    case PhysicalType::kDouble: return data.doubles[slot];
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      const std::string_view bytes = data.bytes(slot);
      if (c.logical == LogicalKind::kDecimal) {
        __int128 v;
        if (!DecimalBytesToInt128(bytes, &v)) return "decimal too long";
        return Int128ToString(v);
      }
      if (c.logical == LogicalKind::kString) return std::string(bytes);
      return Hex(bytes);
    }
  }
  return "?";
}

nlohmann::json CanonicalRow(const ColumnDescriptor& c, const ColumnData& data, int64_t row) {
  if (!c.is_list) return CanonicalValue(c, data, row);
  if (!data.row_valid[row]) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  for (uint32_t i = data.list_offsets[row]; i < data.list_offsets[row + 1]; ++i) {
    list.push_back(CanonicalValue(c, data, i));
  }
  return list;
}

nlohmann::json ReadAllRows(const ParquetFile& file, int col) {
  nlohmann::json rows = nlohmann::json::array();
  ColumnData data;
  for (int rg = 0; rg < file.num_row_groups(); ++rg) {
    absl::Status st = file.ReadColumn(rg, col, &data);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return rows;
    EXPECT_EQ(data.num_rows, file.row_group_num_rows(rg));
    EXPECT_EQ(data.row_valid.size(), static_cast<size_t>(data.num_rows));
    for (int64_t r = 0; r < data.num_rows; ++r) {
      rows.push_back(CanonicalRow(file.columns()[col], data, r));
    }
  }
  return rows;
}

std::vector<std::pair<int32_t, int32_t>> ChunkPages(std::string_view chunk) {
  std::vector<std::pair<int32_t, int32_t>> pages;
  size_t pos = 0;
  while (pos < chunk.size()) {
    PageHeader h;
    size_t header_size;
    if (!DecodePageHeader(chunk.substr(pos), &h, &header_size).ok()) break;
    int32_t encoding = -1;
    if (h.has_data_page) encoding = h.data_page.encoding;
    if (h.has_data_page_v2) encoding = h.data_page_v2.encoding;
    if (h.has_dictionary_page) encoding = h.dictionary_page.encoding;
    pages.emplace_back(h.type, encoding);
    pos += header_size + h.compressed_page_size;
  }
  return pages;
}

}  // namespace pstrain::parquet::testing
