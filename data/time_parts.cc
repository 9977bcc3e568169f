#include "data/time_parts.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr int64_t kDay = 86400;

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// The inverse: year, month (1..12), day (1..31) of `days` since the epoch.
void CivilFromDays(int64_t days, int64_t* y, int* m, int* d) {
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// `n` digits at t[*i] as a number.
bool Digits(std::string_view t, size_t* i, int n, int* out) {
  if (*i + static_cast<size_t>(n) > t.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const char c = t[*i + static_cast<size_t>(k)];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *i += static_cast<size_t>(n);
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<TimePart> ParseTimePart(std::string_view name) {
  if (name == "hour") return TimePart::kHour;
  if (name == "weekday") return TimePart::kWeekday;
  if (name == "month") return TimePart::kMonth;
  if (name == "day_of_year") return TimePart::kDayOfYear;
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", std::string(name), "\" is not a part of a time: hour, weekday, month or day_of_year"));
}

const char* TimePartName(TimePart part) {
  switch (part) {
    case TimePart::kHour:
      return "hour";
    case TimePart::kWeekday:
      return "weekday";
    case TimePart::kMonth:
      return "month";
    case TimePart::kDayOfYear:
      return "day_of_year";
    case TimePart::kNone:
      break;
  }
  return "none";
}

bool ParseTimestamp(std::string_view t, int64_t* seconds) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\r')) t.remove_suffix(1);
  if (t.empty()) return false;
  // Whole seconds since the epoch.
  if (t.size() < 19 && t.find('-', 1) == std::string_view::npos) {
    bool negative = t[0] == '-';
    size_t i = negative ? 1 : 0;
    if (i == t.size()) return false;
    int64_t v = 0;
    for (; i < t.size(); ++i) {
      if (t[i] < '0' || t[i] > '9') return false;
      v = v * 10 + (t[i] - '0');
    }
    *seconds = negative ? -v : v;
    return true;
  }
  size_t i = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  if (!Digits(t, &i, 4, &year) || i >= t.size() || t[i++] != '-' || !Digits(t, &i, 2, &month) ||
      i >= t.size() || t[i++] != '-' || !Digits(t, &i, 2, &day)) {
    return false;
  }
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1 || month < 1 || month > 12 || day < 1 ||
      day > kDaysIn[month - 1] + (month == 2 && IsLeap(year))) {
    return false;
  }
  int64_t offset = 0;
  if (i < t.size()) {
    if (t[i] != 'T' && t[i] != ' ') return false;
    ++i;
    if (!Digits(t, &i, 2, &hour) || i >= t.size() || t[i++] != ':' || !Digits(t, &i, 2, &minute)) {
      return false;
    }
    if (i < t.size() && t[i] == ':') {
      ++i;
      if (!Digits(t, &i, 2, &second)) return false;
      if (i < t.size() && (t[i] == '.' || t[i] == ',')) {
        ++i;
        const size_t from = i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
        if (i == from) return false;
      }
    }
    if (hour > 23 || minute > 59 || second > 60) return false;
    if (i < t.size() && t[i] == 'Z') {
      ++i;
    } else if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
      const int sign = t[i++] == '-' ? -1 : 1;
      int oh, om = 0;
      if (!Digits(t, &i, 2, &oh)) return false;
      if (i < t.size() && t[i] == ':') ++i;
      if (i < t.size() && !Digits(t, &i, 2, &om)) return false;
      if (oh > 23 || om > 59) return false;
      offset = sign * (oh * 3600 + om * 60);
    }
    if (i != t.size()) return false;
  }
  *seconds = DaysFromCivil(year, month, day) * kDay + hour * 3600 + minute * 60 + second - offset;
  return true;
}

int TimePartOf(int64_t seconds, TimePart part) {
  int64_t days = seconds / kDay;
  int64_t rest = seconds % kDay;
  if (rest < 0) {
    rest += kDay;
    --days;
  }
  switch (part) {
    case TimePart::kHour:
      return static_cast<int>(rest / 3600);
    case TimePart::kWeekday: {
      // 1970-01-01 was a Thursday (4).
      const int64_t w = (days + 3) % 7;
      return static_cast<int>(w < 0 ? w + 7 : w) + 1;
    }
    case TimePart::kMonth:
    case TimePart::kDayOfYear: {
      int64_t y;
      int m, d;
      CivilFromDays(days, &y, &m, &d);
      if (part == TimePart::kMonth) return m;
      return static_cast<int>(days - DaysFromCivil(y, 1, 1) + 1);
    }
    case TimePart::kNone:
      break;
  }
  return 0;
}

}  // namespace pstrain::worker
