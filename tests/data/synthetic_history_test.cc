// pstrain gen --history's world: histories of at most L items, a schema
// that reads them (the history's ids the item column's), and a teacher whose
// clicks follow the history: the best any model can do is well above chance.
#include "data/synthetic_history.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "data/file_set.h"
#include "data/schema_file.h"
#include "data/shard_scanner.h"

namespace pstrain::worker {
namespace {

TEST(HistoryWorld, WritesHistoriesItsSchemaReadsAndATeacherThatNeedsThem) {
  char tmpl[] = "/tmp/history_world_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  HistoryWorldOptions o;
  o.rows = 5000;
  o.max_history = 7;
  absl::StatusOr<HistoryWorldReport> report =
      WriteHistoryWorld(o, dir + "/h.csv", dir + "/h.schema.json");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows, 5000);
  EXPECT_NEAR(report->positive_rate, 0.25, 0.03);
  EXPECT_GT(report->oracle_auc, 0.72) << "the history carries the signal";
  std::ifstream in(dir + "/h.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "clicked,age,price,user,item,category,history,history_category");
  int rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, ',');
    ASSERT_EQ(cols.size(), 8u) << line;
    std::vector<std::string> items = absl::StrSplit(cols[6], '|');
    std::vector<std::string> categories = absl::StrSplit(cols[7], '|');
    EXPECT_GE(items.size(), 1u);
    EXPECT_LE(items.size(), 7u);
    EXPECT_EQ(categories.size(), items.size());
    ++rows;
  }
  EXPECT_EQ(rows, 5000);
  // Its schema reads every row, the history's ids being the item column's.
  absl::StatusOr<SchemaFile> schema =
      LoadSchemaFile(dir + "/h.schema.json", {dir + "/h.csv"}, 0);
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->schema.sparse[3].ids_of, 1);
  EXPECT_EQ(schema->schema.sparse[3].max_length, 7);
  EXPECT_EQ(schema->schema.sparse[4].ids_of, 2);
  auto files = ExpandFilePatterns({dir + "/h.csv"});
  ASSERT_TRUE(files.ok());
  ScannerOptions so;
  so.schema = schema->schema;
  so.max_bad_lines_fraction = 0;
  auto scanner = ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
  ASSERT_TRUE(scanner.ok()) << scanner.status();
  ParsedRow row;
  int read = 0;
  while (true) {
    absl::StatusOr<bool> more = (*scanner)->NextRow(&row);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ++read;
  }
  EXPECT_EQ(read, 5000);
  std::system(("rm -rf " + dir).c_str());
}

TEST(HistoryWorld, BadOptionsAreRefused) {
  HistoryWorldOptions o;
  o.topics = 2;
  EXPECT_FALSE(WriteHistoryWorld(o, "/tmp/unused.csv", "/tmp/unused.json").ok());
}

}  // namespace
}  // namespace pstrain::worker
