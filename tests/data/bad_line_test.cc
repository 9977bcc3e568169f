// How bad lines are reported (data/bad_line.h) and which separator a
// file seems to use (data/separator_sniff.h).
#include "data/bad_line.h"

#include <gtest/gtest.h>

#include <string>

#include "data/schema.h"
#include "data/separator_sniff.h"

namespace pstrain::worker {
namespace {

TEST(QuoteLine, CutsAfter200CharactersAndSaysSo) {
  const std::string line(500, 'x');
  const std::string q = QuoteLine(line);
  EXPECT_EQ(q, "\"" + std::string(200, 'x') + "\"...");
  EXPECT_EQ(QuoteLine(std::string(200, 'y')), "\"" + std::string(200, 'y') + "\"");
}

TEST(QuoteLine, EscapesControlBytesAndInvalidUtf8ButKeepsUtf8Text) {
  EXPECT_EQ(QuoteLine("a\tb\"c\\d\x01"), "\"a\\tb\\\"c\\\\d\\x01\"");
  EXPECT_EQ(QuoteLine("Zürich,東京"), "\"Zürich,東京\"");
  EXPECT_EQ(QuoteLine("\xff\xc3"), "\"\\xff\\xc3\"");
  // 200 characters of two bytes each: 400 bytes, none cut in half.
  std::string umlauts;
  for (int i = 0; i < 201; ++i) umlauts += "ü";
  const std::string q = QuoteLine(umlauts);
  EXPECT_EQ(q.size(), 2 + 400 + 3u);
  EXPECT_EQ(q.substr(q.size() - 6), "ü\"...");
}

TEST(BadLineMessage, IsFileLineReasonAndTheQuotedLine) {
  EXPECT_EQ(BadLineMessage("r.csv:7", "column \"year\": not a number: \"x\"", "1,2,x"),
            "r.csv:7: column \"year\": not a number: \"x\"; the line: \"1,2,x\"");
  EXPECT_EQ(BadLineMessage("r.csv:7", "line longer than max_line_bytes 16", ""),
            "r.csv:7: line longer than max_line_bytes 16");
}

TEST(SniffSeparator, FindsTheSeparatorThatGivesTheExpectedColumns) {
  EXPECT_EQ(SniffSeparator("1;31;4.5;1999", ',', 4), ';');
  EXPECT_EQ(SniffSeparator("1\t31\t4.5\t1999", ',', 4), '\t');
  EXPECT_EQ(SniffSeparator("1|31|4.5|1999", '\t', 4), '|');
  EXPECT_EQ(SniffSeparator("1,31,4.5,1999", ',', 4), 0) << "it splits fine";
  EXPECT_EQ(SniffSeparator("1;2;3", ',', 4), ';') << "one field: the likeliest other one";
  EXPECT_EQ(SniffSeparator("New York", ',', 4), 0) << "spaces are text";
  EXPECT_EQ(SniffSeparator("a b c d", ',', 4), ' ') << "unless they give the columns exactly";
  EXPECT_EQ(SniffSeparator("\"a;b\";c", ',', 2), ';');
}

TEST(ColumnCountReason, NamesTheSettingOfTheSchemaOrTheFlag) {
  Schema custom;
  custom.custom = true;
  custom.num_columns = 4;
  custom.field_sep = ',';
  EXPECT_EQ(ColumnCountReason(custom, "1;31;4.5;1999", 1),
            "1 field, the schema expects 4; the file seems to be separated by ';' (set "
            "\"separator\": \"semicolon\" in the schema)");
  EXPECT_EQ(ColumnCountReason(custom, "1,2", 2), "2 fields, the schema expects 4");
  Schema criteo;
  criteo.num_dense = 1;
  criteo.num_sparse = 1;
  EXPECT_EQ(ColumnCountReason(criteo, "1,2,a", 1),
            "1 field, the Criteo layout expects 3; the file seems to be separated by ',' "
            "(--field_sep=comma, or describe the columns with --schema)");
}

}  // namespace
}  // namespace pstrain::worker
