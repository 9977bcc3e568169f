// Time features: timestamps read from text, and the parts taken from them.
#include "data/time_parts.h"

#include <gtest/gtest.h>

#include "data/parser.h"
#include "data/schema_file.h"

#include <cstdint>
#include <string>

namespace pstrain::worker {
namespace {

int64_t Seconds(const std::string& t) {
  int64_t s = -1;
  EXPECT_TRUE(ParseTimestamp(t, &s)) << t;
  return s;
}

TEST(TimeParts, ReadsIsoDatesTimesOffsetsAndEpochSeconds) {
  EXPECT_EQ(Seconds("1970-01-01"), 0);
  EXPECT_EQ(Seconds("1970-01-02T00:00:01"), 86401);
  EXPECT_EQ(Seconds("2001-01-01 00:01:00"), 978307260);  // date -u -d '2001-01-01 00:01' +%s
  EXPECT_EQ(Seconds("2001-01-01T00:01:00.250Z"), 978307260);
  EXPECT_EQ(Seconds("2001-01-01T01:01:00+01:00"), 978307260);
  EXPECT_EQ(Seconds("2000-12-31T19:01-05:00"), 978307260);
  EXPECT_EQ(Seconds("978307260"), 978307260);
  EXPECT_EQ(Seconds(" 2024-02-29 "), 1709164800);  // a leap day
  EXPECT_EQ(Seconds("1969-12-31T23:59:59"), -1);
  for (const char* bad : {"", "2001-13-01", "2001-02-29", "2001-01-01T24:00", "2001-1-1",
                          "yesterday", "2001-01-01T00:01:00+", "2001-01-01X", "12.5",
                          "99999999999999999999", "2001-01-01T00:01:00 junk"}) {
    int64_t s;
    EXPECT_FALSE(ParseTimestamp(bad, &s)) << bad;
  }
}

TEST(TimeParts, HourWeekdayMonthAndDayOfYear) {
  const int64_t t = Seconds("2026-12-07T13:45:10");  // a Monday
  EXPECT_EQ(TimePartOf(t, TimePart::kHour), 13);
  EXPECT_EQ(TimePartOf(t, TimePart::kWeekday), 1);
  EXPECT_EQ(TimePartOf(t, TimePart::kMonth), 12);
  EXPECT_EQ(TimePartOf(t, TimePart::kDayOfYear), 341);
  EXPECT_EQ(TimePartOf(Seconds("2026-12-06"), TimePart::kWeekday), 7);  // Sunday
  EXPECT_EQ(TimePartOf(Seconds("2024-12-31"), TimePart::kDayOfYear), 366);
  EXPECT_EQ(TimePartOf(Seconds("1969-12-31T23:00:00"), TimePart::kHour), 23);
  EXPECT_EQ(TimePartOf(Seconds("1969-12-31T23:00:00"), TimePart::kWeekday), 3);  // Wednesday
  EXPECT_EQ(TimePartOf(Seconds("1900-03-01"), TimePart::kMonth), 3);
  for (const char* name : {"hour", "weekday", "month", "day_of_year"}) {
    absl::StatusOr<TimePart> part = ParseTimePart(name);
    ASSERT_TRUE(part.ok()) << name;
    EXPECT_STREQ(TimePartName(*part), name);
  }
  EXPECT_FALSE(ParseTimePart("minute").ok());
}

// A schema's "time" entries take parts of a text column's timestamps: one
// column may give several parts, each a dense value or a category.
TEST(TimeFeatures, ASchemaTakesPartsOfATextTimestamp) {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(
      R"({"format": "csv", "columns": ["ts", "clicked", "item"], "label": "clicked",
          "dense": [{"column": "ts", "time": "hour"}, {"column": "ts", "time": "day_of_year"}],
          "sparse": ["item", {"column": "ts", "time": "weekday"}, {"column": "ts", "time": "hour"}]})",
      "s.json", {}, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->schema.sparse[2].name, "ts_hour");
  absl::StatusOr<std::unique_ptr<const Parser>> parser = CreateParser(f->schema);
  ASSERT_TRUE(parser.ok()) << parser.status();
  ParsedRow row;
  ASSERT_TRUE((*parser)->Parse("2026-12-07T13:45:10Z,1,i7", &row).ok());
  EXPECT_EQ(row.dense, (std::vector<float>{13.0f, 341.0f}));
  EXPECT_EQ(row.ids, (std::vector<uint64_t>{FeatureId(0, "i7", 0), FeatureId(1, "1", 0),
                                            FeatureId(2, "13", 0)}));
  ASSERT_TRUE((*parser)->Parse(",0,i7", &row).ok());  // a missing time: missing values
  EXPECT_EQ(row.dense, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(row.ids[1], MissingId(1, 0));
  absl::Status bad = (*parser)->Parse("noon,0,i7", &row);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("column \"ts\": not a timestamp: \"noon\""), std::string::npos) << bad;
  // A part twice in the same role is a mistake; an unknown part is named.
  f = ParseSchemaJson(R"({"format": "csv", "columns": ["ts", "y"], "label": "y",
      "sparse": [{"column": "ts", "time": "hour"}, {"column": "ts", "time": "hour"}]})", "s.json", {}, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("sparse: column \"ts\"'s hour is used twice"), std::string::npos) << f.status();
  f = ParseSchemaJson(R"({"format": "csv", "columns": ["ts", "y"], "label": "y",
      "sparse": [{"column": "ts", "time": "minute"}]})", "s.json", {}, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("sparse[0].time: \"minute\" is not a part of a time"),
            std::string::npos) << f.status();
}

}  // namespace
}  // namespace pstrain::worker
