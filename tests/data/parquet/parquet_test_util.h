// Shared helpers of the Parquet tests: fixture paths, the canonical JSON form
// of decoded values (the form make_fixtures.mjs writes), and a walk over a
// chunk's page headers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/parquet/column.h"
#include "data/parquet/parquet_file.h"

namespace pstrain::parquet::testing {

std::string FixtureDir();
std::string ReadFileBytes(const std::string& path);

// Slot `slot` of `data` as make_fixtures.mjs writes values: integers (also
// dates, timestamps, unscaled decimals) as decimal strings, FLOAT/DOUBLE as
// numbers, strings as strings, other bytes as hex, null as null.
nlohmann::json CanonicalValue(const ColumnDescriptor& c, const ColumnData& data, int64_t slot);
// Row `row`: the value, or for a list the array of its elements (null for a
// null list).
nlohmann::json CanonicalRow(const ColumnDescriptor& c, const ColumnData& data, int64_t row);

// Every row of column `col`, row group after row group; failures are test
// failures.
nlohmann::json ReadAllRows(const ParquetFile& file, int col);

// The pages of a chunk (its bytes): (page type, encoding of the values) each;
// dictionary pages give their encoding too.
std::vector<std::pair<int32_t, int32_t>> ChunkPages(std::string_view chunk);

}  // namespace pstrain::parquet::testing
