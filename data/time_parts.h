// Time features: the hour, weekday, month or day of the year of a
// timestamp column, so that a raw event log needs no preprocessing
// (a schema's {"column": "ts", "time": "hour"}, dense or categorical).
//
// A timestamp is read from text as ISO 8601 (2026-12-01, 2026-12-01T13:05:00,
// a space for the T, fractions of a second, a Z or a +hh:mm/-hh:mm offset)
// or as whole seconds since the Unix epoch; from Parquet as its TIMESTAMP
// (ms, us, ns), DATE or INT96 value. The parts are those of the time as
// written (a timestamp with an offset is taken at UTC). Pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace pstrain::worker {

enum class TimePart : uint8_t {
  kNone,
  kHour,       // 0..23
  kWeekday,    // 1 (Monday) .. 7 (Sunday), ISO 8601's
  kMonth,      // 1..12
  kDayOfYear,  // 1..366
};

// "hour", "weekday", "month", "day_of_year"; InvalidArgument listing them.
absl::StatusOr<TimePart> ParseTimePart(std::string_view name);
const char* TimePartName(TimePart part);

// Seconds since 1970-01-01T00:00:00 of text `t`; false when it is not a
// timestamp (or lies outside years 0001-9999).
bool ParseTimestamp(std::string_view t, int64_t* seconds);

// Part `part` of the time `seconds` after the epoch. REQUIRES: part != kNone.
int TimePartOf(int64_t seconds, TimePart part);

}  // namespace pstrain::worker
