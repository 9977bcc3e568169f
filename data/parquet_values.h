// A Parquet column's slot as the value the same field written as text would
// be (parquet_rows.h reads rows through these): a number, a token, a time;
// and what a schema role cannot take. Pure functions of a decoded chunk
// (parquet/column.h) and its column's description.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data/missing_values.h"
#include "data/parquet/column.h"

namespace pstrain::worker {

// BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY.
bool IsBytes(const parquet::ColumnDescriptor& c);

// 10^k for the decimal scales a Parquet decimal can have (precision <= 38).
double Pow10(int k);

// Why column `c` cannot serve a role (a LIST unless `list_ok`, a type the
// reader does not take), or "" when it can.
std::string Refusal(const parquet::ColumnDescriptor& c, bool list_ok);

// A chunk of `rows` rows that all hold `value` (all null when it is empty:
// Hive's null partition), in the dictionary form of one entry: a partition
// column reads like a file's string column.
void FillConstant(const std::string& value, int64_t rows, parquet::ColumnData* d);

// Slot `i` as a number: false when it is null, a missing token or a string
// that is not a finite number.
bool SlotNumber(const parquet::ColumnData& d, const parquet::ColumnDescriptor& c, const MissingTokens& missing,
                int64_t i, double* v);

// Slot `i` as the text a delimited file would hold ("" for a null); the
// view may point into `*scratch`.
std::string_view SlotToken(const parquet::ColumnData& d, const parquet::ColumnDescriptor& c, int64_t i,
                           std::string* scratch);

// Slot `i` as seconds since the epoch (a TIMESTAMP, DATE or INT96 value,
// whole seconds, or a string ParseTimestamp reads): false when it is null
// or not a time.
bool SlotSeconds(const parquet::ColumnData& d, const parquet::ColumnDescriptor& c, int64_t i, int64_t* seconds);

}  // namespace pstrain::worker
