#include "data/delimited_parser.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/schema.h"

namespace pstrain::worker {
namespace {

// A Criteo line with the given label, 13 integers and 26 tokens.
std::string Line(const std::string& label, const std::vector<std::string>& ints,
                 const std::vector<std::string>& tokens) {
  return absl::StrCat(label, "\t", absl::StrJoin(ints, "\t"), "\t", absl::StrJoin(tokens, "\t"));
}

std::vector<std::string> Ints(const std::string& v) { return std::vector<std::string>(13, v); }
std::vector<std::string> Tokens(const std::string& v) { return std::vector<std::string>(26, v); }

DelimitedParser DefaultParser() { return *DelimitedParser::Create(Schema{}); }

TEST(CriteoParser, ParsesLabelDenseAndTokens) {
  std::vector<std::string> ints = Ints("3");
  ints[0] = "0";
  ints[12] = "1000000";
  std::vector<std::string> tokens = Tokens("68fd1e64");
  tokens[25] = "deadbeef";
  ParsedRow row;
  ASSERT_TRUE(DefaultParser().Parse(Line("1", ints, tokens), &row).ok());
  EXPECT_EQ(row.label, 1.0f);
  ASSERT_EQ(row.dense.size(), 13u);
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_FLOAT_EQ(row.dense[1], std::log(4.0f));
  EXPECT_FLOAT_EQ(row.dense[12], static_cast<float>(std::log1p(1e6)));
  ASSERT_EQ(row.ids.size(), 26u);
  ASSERT_EQ(row.field_end.size(), 26u);
  for (int f = 0; f < 26; ++f) EXPECT_EQ(row.field_end[f], static_cast<uint32_t>(f + 1));
  EXPECT_EQ(row.ids[0], FeatureId(0, "68fd1e64", 0));
  EXPECT_EQ(row.ids[25], FeatureId(25, "deadbeef", 0));
}

TEST(CriteoParser, EmptyIntegersAreZeroAndNegativesClampToZero) {
  std::vector<std::string> ints = Ints("");
  ints[1] = "-1";
  ints[2] = "-123456";
  ints[3] = "+7";
  ParsedRow row;
  ASSERT_TRUE(DefaultParser().Parse(Line("0", ints, Tokens("a")), &row).ok());
  EXPECT_EQ(row.label, 0.0f);
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_EQ(row.dense[1], 0.0f);
  EXPECT_EQ(row.dense[2], 0.0f);
  EXPECT_FLOAT_EQ(row.dense[3], std::log(8.0f));
}

TEST(CriteoParser, EmptyTokenGetsTheFieldsMissingId) {
  ParsedRow row;
  ASSERT_TRUE(DefaultParser().Parse(Line("0", Ints("1"), Tokens("")), &row).ok());
  ASSERT_EQ(row.ids.size(), 26u);
  for (int f = 0; f < 26; ++f) EXPECT_EQ(row.ids[f], MissingId(f, 0));
  EXPECT_NE(MissingId(0, 0), MissingId(1, 0));
}

TEST(CriteoParser, SameTokenInTwoFieldsGivesTwoIds) {
  EXPECT_NE(FeatureId(0, "abc", 0), FeatureId(1, "abc", 0));
  EXPECT_NE(FeatureId(3, "abc", 0), FeatureId(3, "abd", 0));
}

TEST(CriteoParser, FeatureIdsAreStableAcrossRunsAndBuilds) {
  // Pinned values: a change here silently invalidates every checkpoint.
  EXPECT_EQ(FeatureId(0, "", 0), HashBytes("", FieldSeed(0)));
  EXPECT_EQ(FeatureId(2, "68fd1e64", 0), HashBytes("68fd1e64", FieldSeed(2)));
  EXPECT_EQ(FieldSeed(0), Mix64(0x7073747261696e00ULL));
  EXPECT_EQ(FeatureId(2, "68fd1e64", 1000), Mix64(FeatureId(2, "68fd1e64", 0)) % 1000);
}

TEST(CriteoParser, HashBucketsFoldIdsIntoRange) {
  Schema schema;
  schema.hash_buckets = 97;
  DelimitedParser parser = *DelimitedParser::Create(schema);
  ParsedRow row;
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> tokens = Tokens(absl::StrCat(i * 7919));
    tokens[5] = "";
    ASSERT_TRUE(parser.Parse(Line("1", Ints("2"), tokens), &row).ok());
    for (uint64_t id : row.ids) EXPECT_LT(id, 97u);
    EXPECT_EQ(row.ids[5], MissingId(5, 97));
  }
}

TEST(CriteoParser, MultiHotFieldsGiveOneIdPerToken) {
  Schema schema;
  schema.num_dense = 1;
  schema.num_sparse = 3;
  schema.multi_hot_sep = '|';
  DelimitedParser parser = *DelimitedParser::Create(schema);
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("1\t5\ta|b|c\t\tx||", &row).ok());
  ASSERT_EQ(row.field_end, (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(row.ids[0], FeatureId(0, "a", 0));
  EXPECT_EQ(row.ids[1], FeatureId(0, "b", 0));
  EXPECT_EQ(row.ids[2], FeatureId(0, "c", 0));
  EXPECT_EQ(row.ids[3], MissingId(1, 0));
  EXPECT_EQ(row.ids[4], FeatureId(2, "x", 0));
  // Only separators: the field is missing.
  ASSERT_TRUE(parser.Parse("0\t\t|||\ta\tb", &row).ok());
  EXPECT_EQ(row.ids[0], MissingId(0, 0));
}

TEST(CriteoParser, CustomSeparatorAndTrailingCarriageReturn) {
  Schema schema;
  schema.num_dense = 2;
  schema.num_sparse = 1;
  schema.field_sep = ',';
  DelimitedParser parser = *DelimitedParser::Create(schema);
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("1,1,2,tok\r", &row).ok());
  EXPECT_EQ(row.ids[0], FeatureId(0, "tok", 0));
}

TEST(CriteoParser, WrongColumnCountIsInvalidArgument) {
  DelimitedParser parser = DefaultParser();
  ParsedRow row;
  std::string good = Line("1", Ints("1"), Tokens("a"));
  absl::Status s = parser.Parse(good + "\textra", &row);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("41 fields, the Criteo layout expects 40"), std::string::npos) << s;
  s = parser.Parse(good.substr(0, good.rfind('\t')), &row);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("39 fields,"), std::string::npos) << s;
  EXPECT_EQ(parser.Parse("", &row).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CriteoParser, BadLabelIsInvalidArgument) {
  DelimitedParser parser = DefaultParser();
  ParsedRow row;
  for (const char* label : {"2", "", "01", "-1", "1.0", " 1", "x"}) {
    absl::Status s = parser.Parse(Line(label, Ints("1"), Tokens("a")), &row);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << label;
    EXPECT_NE(s.message().find("label"), std::string::npos) << s;
  }
}

TEST(CriteoParser, NonNumericIntegerIsInvalidArgumentNamingTheColumn) {
  DelimitedParser parser = DefaultParser();
  ParsedRow row;
  for (const char* bad : {"abc", "1.5", "-", "+", "1 ", " 1", "1e3", "12345678901234567890", "0x1"}) {
    std::vector<std::string> ints = Ints("1");
    ints[2] = bad;
    absl::Status s = parser.Parse(Line("1", ints, Tokens("a")), &row);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("I3"), std::string::npos) << s;
  }
}

TEST(CriteoParser, OverlongLineIsInvalidArgument) {
  Schema schema;
  schema.max_line_bytes = 200;
  DelimitedParser parser = *DelimitedParser::Create(schema);
  ParsedRow row;
  absl::Status s = parser.Parse(Line("1", Ints("1"), Tokens(std::string(10, 'a'))), &row);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_line_bytes"), std::string::npos) << s;
}

TEST(CriteoParser, InvalidSchemaIsRejected) {
  Schema schema;
  schema.multi_hot_sep = '\t';
  EXPECT_EQ(DelimitedParser::Create(schema).status().code(), absl::StatusCode::kInvalidArgument);
  schema = Schema{};
  schema.num_dense = -1;
  EXPECT_EQ(DelimitedParser::Create(schema).status().code(), absl::StatusCode::kInvalidArgument);
  schema = Schema{};
  schema.field_sep = '\n';
  EXPECT_EQ(DelimitedParser::Create(schema).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CriteoParser, RandomBytesNeverCrash) {
  std::mt19937_64 rng(42);
  const std::string alphabet = std::string("0123456789abcdef-+\t\t\t\t|,\r\n ") + '\0' + "\xff";
  Schema multi;
  multi.multi_hot_sep = ',';
  multi.hash_buckets = 1000;
  DelimitedParser parsers[] = {DefaultParser(), *DelimitedParser::Create(multi)};
  ParsedRow row;
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    if (i % 2 == 0) {
      size_t n = rng() % 400;
      for (size_t j = 0; j < n; ++j) line.push_back(alphabet[rng() % alphabet.size()]);
    } else {
      // Mutations of a valid line hit the deeper paths.
      line = Line("1", Ints("12"), Tokens("0a1b"));
      for (int m = 0; m < 3; ++m) line[rng() % line.size()] = static_cast<char>(rng());
    }
    for (DelimitedParser& p : parsers) {
      absl::Status s = p.Parse(line, &row);
      if (s.ok()) {
        ++ok;
        ASSERT_EQ(row.field_end.back(), row.ids.size());
      } else {
        ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      }
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(ParseInt64, AcceptsOnlyDecimalIntegers) {
  int64_t v = -5;
  EXPECT_TRUE(ParseInt64("", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ParseInt64("-42", &v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(ParseInt64("999999999999999999", &v));
  EXPECT_EQ(v, 999999999999999999LL);
  EXPECT_FALSE(ParseInt64("9999999999999999999", &v));
  EXPECT_FALSE(ParseInt64("4a", &v));
}

TEST(DenseTransform, MatchesLog1pOfClampedValue) {
  for (int64_t x : {-5LL, 0LL, 1LL, 2LL, 100LL, 4095LL, 4096LL, 123456789LL}) {
    float want = static_cast<float>(std::log1p(static_cast<double>(std::max<int64_t>(x, 0))));
    EXPECT_EQ(DenseTransform(x), want) << x;
  }
}

// Prints the parse rate on Criteo-like lines; asserts only correctness.
TEST(CriteoParserSpeed, ParsesCriteoLikeLinesAndReportsRowsPerSecond) {
  std::mt19937_64 rng(7);
  std::vector<std::string> lines;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::string> ints, tokens;
    for (int j = 0; j < 13; ++j) {
      ints.push_back(rng() % 10 == 0 ? "" : absl::StrCat(static_cast<int64_t>(rng() % 5000) - 2));
    }
    for (int f = 0; f < 26; ++f) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%08x", static_cast<unsigned>(rng()));
      tokens.push_back(rng() % 20 == 0 ? "" : buf);
    }
    lines.push_back(Line(i % 4 == 0 ? "1" : "0", ints, tokens));
  }
  DelimitedParser parser = DefaultParser();
  ParsedRow row;
  const int kRounds = 150;
  uint64_t checksum = 0;
  auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < kRounds; ++round) {
    for (const std::string& line : lines) {
      ASSERT_TRUE(parser.Parse(line, &row).ok());
      checksum += row.ids[round % 26];
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ parser   ] %.0f rows/s (%zu rows, checksum %llx)\n",
              kRounds * lines.size() / secs, kRounds * lines.size(),
              static_cast<unsigned long long>(checksum));
}

}  // namespace
}  // namespace pstrain::worker
