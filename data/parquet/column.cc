#include "data/parquet/column.h"

#include "data/parquet/column_reader.h"

namespace pstrain::parquet {

ColumnData::ColumnData() = default;
ColumnData::~ColumnData() = default;
ColumnData::ColumnData(ColumnData&&) noexcept = default;
ColumnData& ColumnData::operator=(ColumnData&&) noexcept = default;

bool DecimalBytesToInt128(std::string_view bytes, __int128* out) {
  if (bytes.size() > 16) return false;
  if (bytes.empty()) {
    *out = 0;
    return true;
  }
  // Sign-extend from the first byte, then shift in the rest.
  unsigned __int128 v = static_cast<int8_t>(bytes[0]) < 0 ? ~static_cast<unsigned __int128>(0) : 0;
  for (char c : bytes) v = (v << 8) | static_cast<uint8_t>(c);
  *out = static_cast<__int128>(v);
  return true;
}

}  // namespace pstrain::parquet
