// The check before a job starts (data/data_check.h): a file in
// another separator names the separator it seems to use, with FILE:LINE and
// the line quoted.
#include "data/data_check.h"

#include <gtest/gtest.h>

#include <string>

#include "data/schema_file.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

constexpr const char* kRatings =
    "user;item;rating;year\n1;31;1;1999\n1;1029;0;2003\n2;10;1;1987\n3;5;0;2011\n4;7;1;1995\n";
constexpr const char* kNoHeader = "1;31;1;1999\n1;1029;0;2003\n2;10;1;1987\n3;5;0;2011\n";

absl::StatusOr<Schema> Load(const std::string& json, const std::string& data) {
  absl::StatusOr<SchemaFile> f = ParseSchemaJson(json, "ratings.json", {data}, 0);
  if (!f.ok()) return f.status();
  return f->schema;
}

TEST(CheckDataFiles, AFileInAnotherSeparatorNamesTheOneItSeemsToUse) {
  ScratchDir dir;
  const std::string path = dir.File("ratings.csv");
  WriteFile(path, kNoHeader);
  absl::StatusOr<Schema> s = Load(
      R"({"format": "csv", "columns": ["user", "item", "rating", "year"], "label": "rating",
          "dense": ["year"], "sparse": ["user", "item"]})",
      path);
  ASSERT_TRUE(s.ok()) << s.status();
  DataCheckOptions o;
  o.flag = "--train_data";
  const absl::Status st = CheckDataFiles({path}, *s, o);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "--train_data: " + path +
                ":1: 1 field, the schema expects 4; the file seems to be separated by ';' (set "
                "\"separator\": \"semicolon\" in the schema); the line: \"1;31;1;1999\" (4 of "
                "its first 4 lines do not parse)");
}

TEST(CheckDataFiles, AHeaderInAnotherSeparatorNamesTheOneItSeemsToUse) {
  ScratchDir dir;
  const std::string path = dir.File("ratings.csv");
  WriteFile(path, kRatings);
  absl::StatusOr<Schema> s =
      Load(R"({"format": "csv", "header": true, "columns": ["user", "item", "rating", "year"],
               "label": "rating", "dense": ["year"], "sparse": ["user", "item"]})",
           path);
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::Status st = CheckDataFiles({path}, *s, DataCheckOptions{"--train_data"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(path + ":1: the header's column 0 is"), std::string::npos) << st;
  EXPECT_NE(st.message().find("seems to be separated by ';'"), std::string::npos) << st;
}

TEST(SchemaFile, NamesFromAHeaderInAnotherSeparatorNameTheOneItSeemsToUse) {
  // By name and by index.
  ScratchDir dir;
  const std::string path = dir.File("ratings.csv");
  WriteFile(path, kRatings);
  absl::StatusOr<Schema> s = Load(
      R"({"format": "csv", "header": true, "label": "rating", "dense": ["year"],
          "sparse": ["user", "item"]})",
      path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("no column \"rating\""), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("the file seems to be separated by ';' (set \"separator\": "
                                      "\"semicolon\" in the schema)"),
            std::string::npos)
      << s.status();
  s = Load(R"({"format": "csv", "header": true, "label": 2, "dense": [3], "sparse": [0, 1]})",
           path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("seems to be separated by ';'"), std::string::npos)
      << s.status();
}

TEST(CheckDataFiles, NaFieldsAndOneBadLinePassNamingNothing) {
  ScratchDir dir;
  const std::string path = dir.File("ok.csv");
  WriteFile(path, "user,item,rating,year\n1,31,1,NA\n1,1029,0,\n2,NA,1,1987\nx,y,z,w\n4,7,1,1995\n");
  absl::StatusOr<Schema> s =
      Load(R"({"format": "csv", "header": true, "label": "rating", "dense": ["year"],
               "sparse": ["user", "item"]})",
           path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(CheckDataFiles({path}, *s, DataCheckOptions{"--train_data"}).ok());
}

}  // namespace
}  // namespace pstrain::worker
