// Missing values (data/missing_values.h): which tokens are missing,
// what a missing dense or categorical value becomes in both layouts, what
// a saved model records, and the statistics of standardized columns.
#include "data/missing_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/delimited_parser.h"
#include "data/schema_file.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

// year (standardize, mean 1990, stddev 10), price (log1p), n (none),
// w (none, missing 5), city (categorical), tags (multi-hot), label last.
constexpr const char* kSchema = R"({
  "format": "csv", "columns": ["year", "price", "n", "w", "city", "tags", "label"],
  "label": "label",
  "dense": [{"column": "year", "transform": "standardize", "mean": 1990, "stddev": 10},
            {"column": "price", "transform": "log1p"}, "n", {"column": "w", "missing": 5}],
  "sparse": ["city", {"column": "tags", "multi_hot": "|"}]
})";

Schema Parse(const std::string& json) {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(json, "s.json", {}, 0);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? f->schema : Schema{};
}

TEST(MissingTokens, EmptyBlankAndTheDefaultTokensAreMissing) {
  MissingTokens t(DefaultMissingTokens());
  for (const char* s : {"", "   ", "NA", "N/A", "NaN", "nan", "null", "NULL", "None", "?", " NA "}) {
    EXPECT_TRUE(t.Contains(s)) << "'" << s << "'";
  }
  for (const char* s : {"0", "na", "NAN", "Nonexistent", "??", "a9f3e2c1", "inf"}) {
    EXPECT_FALSE(t.Contains(s)) << "'" << s << "'";
  }
  MissingTokens empty;
  EXPECT_TRUE(empty.Contains(""));
  EXPECT_FALSE(empty.Contains("NA"));
}

TEST(MissingTokens, TokensHoldingTheSeparatorAreRefused) {
  EXPECT_TRUE(ValidateMissingTokens({"NA", "-"}, ',').ok());
  absl::Status s = ValidateMissingTokens({"a,b"}, ',');
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a,b"), std::string::npos) << s;
}

TEST(CustomLayout, AMissingStandardizedValueIsTheTrainingMean) {
  DelimitedParser parser = *DelimitedParser::Create(Parse(kSchema));
  ParsedRow row;
  for (const char* year : {"", "NA", "null", "?", "NaN", " NA ", "            "}) {
    ASSERT_TRUE(parser.Parse(absl::StrCat(year, ",3,4,6,paris,a|b,1"), &row).ok()) << year;
    EXPECT_EQ(row.dense[0], 0.0f) << "'" << year << "' is the mean: 0 after the transform";
  }
  ASSERT_TRUE(parser.Parse("2000,3,4,6,paris,a|b,1", &row).ok());
  EXPECT_FLOAT_EQ(row.dense[0], 1.0f);
}

TEST(CustomLayout, OtherMissingDenseValuesAreZeroTransformedOrTheirOwnMissing) {
  DelimitedParser parser = *DelimitedParser::Create(Parse(kSchema));
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("1990,NA,None,N/A,paris,a,0", &row).ok());
  EXPECT_EQ(row.dense[1], 0.0f);  // log1p(0)
  EXPECT_EQ(row.dense[2], 0.0f);  // none: 0
  EXPECT_EQ(row.dense[3], 5.0f);  // the schema's "missing"
  EXPECT_EQ(parser.Parse("1990,abc,1,1,paris,a,0", &row).code(),
            absl::StatusCode::kInvalidArgument)
      << "text that is no missing token stays a bad value";
}

TEST(CustomLayout, MissingCategoricalTokensAreTheFieldsMissingId) {
  DelimitedParser parser = *DelimitedParser::Create(Parse(kSchema));
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("1990,1,1,1,NA,a|NA|null|b,0", &row).ok());
  ASSERT_EQ(row.ids.size(), 3u);
  EXPECT_EQ(row.ids[0], MissingId(0, 0));
  EXPECT_EQ(row.ids[1], FeatureId(1, "a", 0));
  EXPECT_EQ(row.ids[2], FeatureId(1, "b", 0));
  ASSERT_TRUE(parser.Parse("1990,1,1,1,?,NA|,0", &row).ok());
  EXPECT_EQ(row.ids[0], MissingId(0, 0));
  EXPECT_EQ(row.ids[1], MissingId(1, 0)) << "a bag of missing tokens is the missing id";
}

TEST(CustomLayout, MissingColumnsNamesTheFieldsALineLeavesMissing) {
  DelimitedParser parser = *DelimitedParser::Create(Parse(kSchema));
  std::vector<std::string_view> scratch;
  std::vector<int> columns;
  parser.MissingColumns(",3,NA,6,paris,NA|,", &scratch, &columns);
  EXPECT_EQ(columns, (std::vector<int>{0, 2, 5})) << "the label column is not a field";
  parser.MissingColumns("1990,3,4,6,paris,a,1", &scratch, &columns);
  EXPECT_TRUE(columns.empty());
}

TEST(CustomLayout, TheSchemasMissingValuesReplaceTheDefaultTokens) {
  std::string json = kSchema;
  json.insert(json.rfind('}'), R"(, "missing_values": ["-"])");
  DelimitedParser parser = *DelimitedParser::Create(Parse(json));
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("-,3,4,6,-,a,1", &row).ok());
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_EQ(row.ids[0], MissingId(0, 0));
  EXPECT_EQ(parser.Parse("NA,3,4,6,x,a,1", &row).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CriteoLayout, MissingTokensAreZeroAndTheMissingId) {
  Schema s;
  s.num_dense = 2;
  s.num_sparse = 2;
  DelimitedParser parser = *DelimitedParser::Create(s);
  ParsedRow row;
  ASSERT_TRUE(parser.Parse("1\tNA\t3\tnull\tx", &row).ok());
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_EQ(row.ids[0], MissingId(0, 0));
  EXPECT_EQ(row.ids[1], FeatureId(1, "x", 0));
  EXPECT_EQ(parser.Parse("1\tmany\t3\ta\tb", &row).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SavedSchema, RecordsTheRuleAndKeepsOldModelsReadingAsBefore) {
  const Schema s = Parse(kSchema);
  const nlohmann::json saved = SchemaJson(s);
  EXPECT_EQ(saved["dense"][0]["missing"], "mean");
  EXPECT_EQ(saved["dense"][3]["missing"], 5.0);
  EXPECT_EQ(saved["missing_values"].size(), DefaultMissingTokens().size());
  absl::StatusOr<Schema> back = SchemaFromJson(saved, "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ParsedRow row;
  ASSERT_TRUE(DelimitedParser::Create(*back)->Parse("NA,3,4,,NA,a,1", &row).ok());
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_EQ(row.dense[3], 5.0f);

  // A model saved before: no "missing" (raw 0 for every column), no
  // "missing_values" (only empty fields).
  nlohmann::json old = saved;
  old.erase("missing_values");
  old["dense"][0].erase("missing");
  back = SchemaFromJson(old, "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  DelimitedParser legacy = *DelimitedParser::Create(*back);
  ASSERT_TRUE(legacy.Parse(",3,4,6,NA,a,1", &row).ok());
  EXPECT_FLOAT_EQ(row.dense[0], -199.0f) << "raw 0, standardized, as the old model trained";
  EXPECT_EQ(row.ids[0], FeatureId(0, "NA", 0)) << "NA was a token like any other";
  EXPECT_EQ(legacy.Parse("NA,3,4,6,x,a,1", &row).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SchemaFile, MeanIsAMissingValueOfStandardizedColumnsOnly) {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(
      R"({"columns": ["a", "y"], "label": "y", "dense": [{"column": "a", "missing": "mean"}]})",
      "s.json", {}, 0);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("dense[0].missing"), std::string::npos) << f.status();
}

TEST(ComputeDenseStats, TakesTheStatisticsOfTheValuesPresent) {
  ScratchDir dir;
  // 10, 20, 30 present; three missing ones that a 0 would drag to 10.
  WriteFile(dir.File("d.csv"), "v,y\n10,1\n,0\nNA,1\n20,0\n?,1\n30,0\n");
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(
      R"({"format": "csv", "header": true, "label": "y",
          "dense": [{"column": "v", "transform": "standardize"}]})",
      "s.json", {dir.File("d.csv")}, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  Schema s = f->schema;
  ASSERT_TRUE(ComputeDenseStats({dir.File("d.csv")}, 100, &s).ok());
  EXPECT_DOUBLE_EQ(s.dense[0].mean, 20.0);
  EXPECT_DOUBLE_EQ(s.dense[0].stddev, 10.0);
  ParsedRow row;
  ASSERT_TRUE(DelimitedParser::Create(s)->Parse("NA,1", &row).ok());
  EXPECT_EQ(row.dense[0], 0.0f);
}

}  // namespace
}  // namespace pstrain::worker
