// A large file written by someone else: flights-3m.parquet of npm's
// vega-datasets 3.2.1 (3,000,000 rows, 11 row groups, ZSTD). Not in the
// repository: the test skips unless PSTRAIN_FLIGHTS_PARQUET names it or it
// lies at /tmp/ds/package/data/flights-3m.parquet. Prints the time to decode
// the whole file on one thread. The expected sums and counts were computed
// from the same file with parquet-wasm 0.8.0 (arrow-rs), an independent
// reader.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "data/parquet/parquet_file.h"

namespace pstrain::parquet {
namespace {

std::string FlightsPath() {
  const char* env = std::getenv("PSTRAIN_FLIGHTS_PARQUET");
  return env != nullptr ? env : "/tmp/ds/package/data/flights-3m.parquet";
}

TEST(ParquetFlights, WholeFileDecodesOnOneThread) {
  const std::string path = FlightsPath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  // The decode alone, timed: open, then every chunk of every column.
  const auto start = std::chrono::steady_clock::now();
  auto file = ParquetFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const ParquetFile& f = **file;
  ColumnData data;
  int64_t values = 0;
  for (size_t col = 0; col < f.columns().size(); ++col) {
    for (int rg = 0; rg < f.num_row_groups(); ++rg) {
      absl::Status st = f.ReadColumn(rg, static_cast<int>(col), &data);
      ASSERT_TRUE(st.ok()) << st;
      values += data.num_values;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << path << ": " << f.columns().size() << " columns, " << values << " values decoded in "
            << seconds << " s (one thread)\n";

  EXPECT_EQ(f.num_rows(), 3000000);
  EXPECT_EQ(f.num_row_groups(), 11);
  const int date = f.FindColumn("date"), origin = f.FindColumn("origin");
  ASSERT_GE(date, 0);
  ASSERT_GE(origin, 0);
  EXPECT_EQ(f.columns()[date].logical, LogicalKind::kTimestampMicros);
  EXPECT_EQ(f.columns()[origin].logical, LogicalKind::kString);
  int64_t rows = 0, nulls = 0;
  std::map<std::string, int64_t> sums, lax;
  std::map<std::string, std::string> first, last;
  for (size_t col = 0; col < f.columns().size(); ++col) {
    const ColumnDescriptor& c = f.columns()[col];
    for (int rg = 0; rg < f.num_row_groups(); ++rg) {
      absl::Status st = f.ReadColumn(rg, static_cast<int>(col), &data);
      ASSERT_TRUE(st.ok()) << st;
      rows += data.num_rows;
      for (uint8_t v : data.row_valid) nulls += v == 0;
      for (int64_t i = 0; i < data.num_rows; ++i) {
        if (!data.valid(i)) continue;
        std::string text;
        if (c.type == PhysicalType::kByteArray) {
          text = std::string(data.bytes(i));
          lax[c.name] += text == "LAX";
        } else {
          // date: micros, summed as millis as the other reader gives them
          const int64_t v = static_cast<int>(col) == date ? data.ints[i] / 1000 : data.ints[i];
          sums[c.name] += v;
          text = std::to_string(data.ints[i]);
        }
        if (rg == 0 && i == 0) first[c.name] = text;
        last[c.name] = text;
      }
    }
  }
  EXPECT_EQ(nulls, 0);
  EXPECT_EQ(rows, 3000000 * static_cast<int64_t>(f.columns().size()));
  EXPECT_EQ(sums["date"], 2958522682120320000);
  EXPECT_EQ(sums["delay"], 20003603);
  EXPECT_EQ(sums["distance"], 2194861208);
  EXPECT_EQ(lax["origin"], 115245);
  EXPECT_EQ(lax["destination"], 115225);
  EXPECT_EQ(first["date"], "978307260000000");
  EXPECT_EQ(last["date"], "993945600000000");
  EXPECT_EQ(first["delay"], "33");
  EXPECT_EQ(first["distance"], "2176");
  EXPECT_EQ(last["distance"], "373");
  EXPECT_EQ(first["origin"], "LAS");
  EXPECT_EQ(last["origin"], "ATL");
  EXPECT_EQ(first["destination"], "PHL");
  EXPECT_EQ(last["destination"], "CVG");
}

}  // namespace
}  // namespace pstrain::parquet
