#include "data/schema_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "data/delimited_parser.h"
#include "data/file_set.h"
#include "data/reader.h"
#include "data/shard_scanner.h"

namespace pstrain::worker {
namespace {

class SchemaFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/schema_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  absl::StatusOr<Schema> Parse(const std::string& json, const std::vector<std::string>& data = {}) {
    absl::StatusOr<SchemaFile> f = ParseSchemaJson(json, "s.json", data, 0);
    if (!f.ok()) return f.status();
    return f->schema;
  }

  // All rows of `path` under `schema`, header skipped.
  std::vector<ParsedRow> ReadAll(const std::string& path, const Schema& schema) {
    auto files = ExpandFilePatterns({path});
    EXPECT_TRUE(files.ok()) << files.status();
    ScannerOptions so;
    so.schema = schema;
    so.max_bad_lines_fraction = 0;
    auto scanner = ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
    EXPECT_TRUE(scanner.ok()) << scanner.status();
    std::vector<ParsedRow> rows;
    ParsedRow row;
    while (true) {
      absl::StatusOr<bool> more = (*scanner)->NextRow(&row);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      rows.push_back(row);
    }
    return rows;
  }

  std::string dir_;
};

TEST_F(SchemaFileTest, ParsesFloatsTransformsAndMultiHot) {
  std::string csv = Write("a.csv",
                          "price,city,age,tags,clicked\n"
                          "147696.28,paris,-3.5,a|b,1\n"
                          "\"2.5\",\"new york, ny\",,,0\n");
  absl::StatusOr<Schema> s = Parse(R"({
    "format": "csv", "header": true, "label": "clicked",
    "dense": [{"column": "price", "transform": "log1p"},
              {"column": "age", "transform": "none", "missing": 7}],
    "sparse": ["city", {"column": "tags", "multi_hot": "|", "pooling": "mean"}]
  })", {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_columns, 5);
  EXPECT_EQ(s->label.column, 4);
  EXPECT_EQ(s->sparse[1].pooling, BagPooling::kMean);
  std::vector<ParsedRow> rows = ReadAll(csv, *s);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, 1.0f);
  EXPECT_EQ(rows[0].dense[0], static_cast<float>(std::log1p(147696.28)));
  EXPECT_EQ(rows[0].dense[1], -3.5f);
  EXPECT_EQ(rows[0].ids.size(), 3u);  // paris, a, b
  EXPECT_EQ(rows[0].ids[0], FeatureId(0, "paris", 0));
  EXPECT_EQ(rows[0].ids[1], FeatureId(1, "a", 0));
  EXPECT_EQ(rows[1].label, 0.0f);
  EXPECT_EQ(rows[1].dense[0], static_cast<float>(std::log1p(2.5)));
  EXPECT_EQ(rows[1].dense[1], 7.0f) << "an empty value is the column's \"missing\"";
  EXPECT_EQ(rows[1].ids[0], FeatureId(0, "new york, ny", 0));
  EXPECT_EQ(rows[1].ids[1], MissingId(1, 0));
}

TEST_F(SchemaFileTest, NegativeValuesUnderEachTransform) {
  DenseColumn c;
  c.transform = Transform::kLog1p;
  EXPECT_EQ(ApplyTransform(c, -3), -static_cast<float>(std::log1p(3.0)));
  c.transform = Transform::kLog1pClamp;
  EXPECT_EQ(ApplyTransform(c, -3), 0.0f);
  EXPECT_EQ(ApplyTransform(c, 41), DenseTransform(41));
  c.transform = Transform::kNone;
  c.clip_lo = -1;
  c.clip_hi = 10;
  EXPECT_EQ(ApplyTransform(c, -3), -1.0f);
  EXPECT_EQ(ApplyTransform(c, 30), 10.0f);
  c.transform = Transform::kStandardize;
  c.clip_lo = -1e9;
  c.mean = 2;
  c.stddev = 4;
  EXPECT_EQ(ApplyTransform(c, 10), 2.0f);
}

TEST_F(SchemaFileTest, SameRowsAsCriteoTsv) {
  // Integer dense values and label first in TSV; the same rows as CSV with
  // a header, the label last and the columns in another order.
  std::string tsv = Write("a.tsv", "1\t5\t-2\tx\ty\n0\t\t300\t\tz\n");
  std::string csv = Write("a.csv", "c2,i2,c1,i1,label\ny,-2,x,5,1\nz,300,,,0\n");
  Schema criteo;
  criteo.num_dense = 2;
  criteo.num_sparse = 2;
  absl::StatusOr<Schema> s = Parse(R"({
    "separator": ",", "header": true, "label": "label", "dense_transform": "log1p_clamp",
    "dense": ["i1", "i2"], "sparse": ["c1", "c2"]
  })", {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<ParsedRow> a = ReadAll(tsv, criteo);
  std::vector<ParsedRow> b = ReadAll(csv, *s);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t r = 0; r < a.size(); ++r) {
    EXPECT_EQ(a[r].label, b[r].label);
    EXPECT_EQ(a[r].dense, b[r].dense);
    EXPECT_EQ(a[r].ids, b[r].ids);
    EXPECT_EQ(a[r].field_end, b[r].field_end);
  }
}

TEST_F(SchemaFileTest, LabelByThreshold) {
  std::string csv = Write("f.csv", "delay,carrier\n38,AA\n3,UA\n15,AA\n");
  absl::StatusOr<Schema> s =
      Parse(R"({"format": "csv", "header": true, "label": "delay > 15", "sparse": ["carrier"]})",
            {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->label.op, LabelColumn::Op::kGt);
  EXPECT_EQ(s->label.threshold, 15);
  std::vector<ParsedRow> rows = ReadAll(csv, *s);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].label, 1.0f);
  EXPECT_EQ(rows[1].label, 0.0f);
  EXPECT_EQ(rows[2].label, 0.0f);
  s = Parse(R"({"num_columns": 2, "label": {"column": 0, "op": ">=", "threshold": 15},
                "sparse": [1]})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->label.op, LabelColumn::Op::kGe);
}

TEST_F(SchemaFileTest, ErrorsNameTheKeyAndColumn) {
  std::string csv = Write("h.csv", "price,city,clicked,id\n1,a,0,7\n");
  auto error = [&](const std::string& json) {
    absl::StatusOr<Schema> s = Parse(json, {csv});
    EXPECT_FALSE(s.ok()) << json;
    return std::string(s.status().message());
  };
  std::string e = error(R"({"format": "csv", "header": true, "label": "clicked",
                            "dense": ["prise"], "sparse": ["city"], "ignore": ["id"]})");
  EXPECT_NE(e.find("dense[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("no column \"prise\""), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean \"price\""), std::string::npos) << e;
  EXPECT_NE(e.find("h.csv"), std::string::npos) << e;
  e = error(R"({"format": "csv", "header": true, "label": "clicked",
                "dense": ["price"], "sparse": ["city"]})");
  EXPECT_NE(e.find("\"id\" has no role"), std::string::npos) << e;
  e = error(R"({"format": "csv", "header": true, "label": "clicked", "ignore": "rest",
                "dense": [{"column": "price", "transform": "log"}]})");
  EXPECT_NE(e.find("unknown transform \"log\""), std::string::npos) << e;
  e = error(R"({"format": "csv", "header": true, "lable": "clicked", "dense": ["price"]})");
  EXPECT_NE(e.find("unknown key \"lable\" (did you mean \"label\"?)"), std::string::npos) << e;
  e = error(R"({"label": "clicked", "dense": ["price"]})");
  EXPECT_NE(e.find("no names are known"), std::string::npos) << e;
  e = error(R"({"format": "csv", "header": true, "label": "clicked", "ignore": "rest",
                "dense": ["price", "price"]})");
  EXPECT_NE(e.find("used twice"), std::string::npos) << e;
  e = error(R"({"format": "csv", "header": true, "label": "clicked", "ignore": "rest",
                "dense": ["price"], "weight": "id"})");
  EXPECT_NE(e.find("not built"), std::string::npos) << e;
  e = error("{\"label\": 0,");
  EXPECT_NE(e.find("not JSON"), std::string::npos) << e;
}

TEST_F(SchemaFileTest, HeaderThatDiffersIsAnErrorNamingTheColumn) {
  std::string a = Write("a.csv", "price,city,clicked\n1,a,0\n");
  std::string b = Write("b.csv", "price,town,clicked\n1,a,0\n");
  absl::StatusOr<Schema> s = Parse(
      R"({"format": "csv", "header": true, "label": "clicked", "dense": ["price"],
          "sparse": ["city"]})", {a});
  ASSERT_TRUE(s.ok()) << s.status();
  auto files = ExpandFilePatterns({b});
  ASSERT_TRUE(files.ok());
  ScannerOptions so;
  so.schema = *s;
  auto scanner = ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
  ASSERT_TRUE(scanner.ok());
  ParsedRow row;
  absl::StatusOr<bool> more = (*scanner)->NextRow(&row);
  ASSERT_FALSE(more.ok());
  std::string e(more.status().message());
  EXPECT_NE(e.find("b.csv:1"), std::string::npos) << e;
  EXPECT_NE(e.find("\"town\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"city\""), std::string::npos) << e;
}

TEST_F(SchemaFileTest, StandardizeFromAFirstPass) {
  std::string csv = Write("s.csv", "x,y\n1,0\n2,1\n3,0\n6,1\n");
  absl::StatusOr<Schema> s = Parse(R"({"format": "csv", "header": true, "label": "y",
                                       "dense": [{"column": "x", "transform": "standardize"}]})",
                                   {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->dense[0].has_stats);
  Schema schema = *s;
  ASSERT_TRUE(ComputeDenseStats({csv}, 1000, &schema).ok());
  EXPECT_TRUE(schema.dense[0].has_stats);
  EXPECT_DOUBLE_EQ(schema.dense[0].mean, 3.0);
  EXPECT_NEAR(schema.dense[0].stddev, std::sqrt(14.0 / 3.0), 1e-12);
  std::vector<ParsedRow> rows = ReadAll(csv, schema);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_NEAR(rows[0].dense[0], (1 - 3) / std::sqrt(14.0 / 3.0), 1e-6);
}

// A behaviour history: its items hash as the candidate column's (one id, one
// embedding row, for an item wherever it appears), and only its last
// max_length items are kept.
TEST_F(SchemaFileTest, AHistoryTakesItsIdsFromTheItemColumnAndKeepsItsLastItems) {
  std::string csv = Write("h.csv",
                          "clicked,item,history\n"
                          "1,i7,i1|i2|i3|i7\n"
                          "0,i2,i9\n");
  const std::string schema = R"({
    "format": "csv", "header": true, "label": "clicked", "hash_buckets": 1000,
    "sparse": ["item", {"column": "history", "multi_hot": "|", "ids_like": "item", "max_length": 3}]
  })";
  absl::StatusOr<Schema> s = Parse(schema, {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sparse[1].ids_of, 0);
  EXPECT_EQ(s->sparse[1].max_length, 3);
  std::vector<ParsedRow> rows = ReadAll(csv, *s);
  ASSERT_EQ(rows.size(), 2u);
  // Row 0: the item, then the last 3 of 4 history items, hashed as items.
  ASSERT_EQ(rows[0].ids.size(), 4u);
  EXPECT_EQ(rows[0].ids[0], FeatureId(0, "i7", 1000));
  EXPECT_EQ(rows[0].ids[1], FeatureId(0, "i2", 1000));
  EXPECT_EQ(rows[0].ids[3], rows[0].ids[0]) << "i7 is one id in both columns";
  EXPECT_EQ(rows[1].ids[0], rows[0].ids[1]) << "i2 is one id in both columns";
  // The saved schema (an exported model's) reads back the same.
  absl::StatusOr<Schema> back = SchemaFromJson(SchemaJson(*s), "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sparse[1].ids_of, 0);
  EXPECT_EQ(back->sparse[1].max_length, 3);
  EXPECT_EQ(ReadAll(csv, *back)[0].ids, rows[0].ids);
  // Mistakes name the key.
  EXPECT_THAT(Parse(R"({"format": "csv", "header": true, "label": "clicked",
    "sparse": ["item", {"column": "history", "multi_hot": "|", "ids_like": "clicked"}]})", {csv})
                  .status().message(),
              ::testing::HasSubstr("sparse[1].ids_like: column \"clicked\" is not a sparse column"));
  EXPECT_THAT(Parse(R"({"format": "csv", "header": true, "label": "clicked",
    "sparse": [{"column": "item", "hash_buckets": 10},
               {"column": "history", "multi_hot": "|", "ids_like": "item"}]})", {csv})
                  .status().message(),
              ::testing::HasSubstr("share their hash size"));
  EXPECT_THAT(Parse(R"({"format": "csv", "header": true, "label": "clicked",
    "sparse": ["item", {"column": "history", "max_length": 3}]})", {csv})
                  .status().message(),
              ::testing::HasSubstr("sparse[1].max_length: only a multi_hot column"));
}

// A multi-task model's labels: named, each a column or a threshold, and
// missing (NaN: masked out of its head) where the field is empty.
TEST_F(SchemaFileTest, NamedLabelsAreReadAndAnEmptyOneIsMissing) {
  std::string csv = Write("l.csv",
                          "clicked,converted,watch,item\n"
                          "1,1,40,i1\n"
                          "0,,5,i2\n"
                          "1,0,,i3\n");
  const std::string schema = R"({
    "format": "csv", "header": true, "label": "clicked", "hash_buckets": 1000,
    "labels": {"converted": "converted", "long_view": "watch > 30"},
    "sparse": ["item"]
  })";
  absl::StatusOr<Schema> s = Parse(schema, {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(LabelNames(*s), (std::vector<std::string>{"clicked", "converted", "long_view"}));
  std::vector<ParsedRow> rows = ReadAll(csv, *s);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].extra_labels, (std::vector<float>{1, 1}));
  EXPECT_TRUE(std::isnan(rows[1].extra_labels[0]));
  EXPECT_EQ(rows[1].extra_labels[1], 0.0f);
  EXPECT_EQ(rows[2].extra_labels[0], 0.0f);
  EXPECT_TRUE(std::isnan(rows[2].extra_labels[1]));
  // The saved schema (an exported model's) reads back the same.
  absl::StatusOr<Schema> back = SchemaFromJson(SchemaJson(*s), "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(LabelNames(*back), LabelNames(*s));
  EXPECT_EQ(ReadAll(csv, *back)[0].extra_labels, rows[0].extra_labels);
  // Through the reader's shuffle window, each row keeps its own labels.
  ReaderOptions ro;
  ro.patterns = {csv};
  ro.schema = *s;
  ro.shuffle_buffer_rows = 3;
  ro.seed = 5;
  absl::StatusOr<std::shared_ptr<const Batch>> all = worker::ReadAll(ro);
  ASSERT_TRUE(all.ok()) << all.status();
  const Batch& b = **all;
  ASSERT_EQ(b.size, 3);
  ASSERT_EQ(b.num_extra_labels, 2);
  for (int r = 0; r < 3; ++r) {
    // The row it came from, by its item.
    const int source = b.ids[0][r] == rows[0].ids[0] ? 0 : b.ids[0][r] == rows[1].ids[0] ? 1 : 2;
    EXPECT_EQ(b.labels[r], rows[source].label);
    for (int j = 0; j < 2; ++j) {
      const float want = rows[source].extra_labels[j];
      const float got = LabelOf(b, 1 + j, r);
      EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << "row " << r << " label " << j;
    }
  }
  // Mistakes name the label.
  const auto error = [&](const std::string& labels) {
    return std::string(Parse(R"({"format": "csv", "header": true, "label": "clicked",
      "sparse": ["item"], "ignore": "rest", "labels": )" + labels + "}", {csv})
                           .status().message());
  };
  EXPECT_THAT(error(R"({"again": "clicked"})"), ::testing::HasSubstr("labels.again: column \"clicked\" is the first label's"));
  EXPECT_THAT(error(R"({"clicked": "converted"})"), ::testing::HasSubstr("labels.clicked: the first label"));
  EXPECT_THAT(error(R"({"c": "convertd"})"), ::testing::HasSubstr("labels.c: no column \"convertd\""));
  EXPECT_THAT(error(R"(["converted"])"), ::testing::HasSubstr("labels: an object of named labels"));
  EXPECT_THAT(error(R"({"a": "converted", "b": "converted"})"), ::testing::HasSubstr("is label \"a\"'s too"));
  // A value that is not a label is a bad line naming the label.
  auto parser = CreateParser(*s);
  ASSERT_TRUE(parser.ok());
  ParsedRow row;
  EXPECT_THAT(std::string((*parser)->Parse("1,2,40,i1", &row).message()),
              ::testing::HasSubstr("label \"converted\" (column \"converted\"): not 0 or 1 or empty: \"2\""));
}

TEST_F(SchemaFileTest, SavedJsonRoundTrips) {
  std::string csv = Write("r.csv", "a;b;c;d;e\n1;2;x;y|z;q\n");
  absl::StatusOr<Schema> s = Parse(R"({
    "separator": ";", "header": true, "label": {"column": "a", "op": "<", "threshold": 2},
    "dense": [{"column": "b", "transform": "standardize", "mean": 1.5, "stddev": 2,
               "clip": [0, null]}],
    "sparse": [{"column": "c", "hash_buckets": 1000},
               {"column": "d", "multi_hot": "|", "pooling": "mean", "embedding_dim": 8}],
    "ignore": ["e"]
  })", {csv});
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Schema> back = SchemaFromJson(SchemaJson(*s), "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SchemaJson(*back).dump(), SchemaJson(*s).dump());
  EXPECT_EQ(back->sparse[1].embedding_dim, 8);
  EXPECT_EQ(back->sparse[0].embedding_dim, 0) << "the model's";
  std::vector<ParsedRow> a = ReadAll(csv, *s);
  std::vector<ParsedRow> b = ReadAll(csv, *back);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].label, 1.0f);
  EXPECT_EQ(a[0].dense, b[0].dense);
  EXPECT_EQ(a[0].ids, b[0].ids);
  EXPECT_LT(a[0].ids[0], 1000u);
}

TEST(SplitColumns, QuotesHoldTheSeparator) {
  std::vector<std::string_view> cols;
  SplitColumns("a,\"b,c\",,\"d\"\"e\"", ',', &cols);
  ASSERT_EQ(cols.size(), 4u);
  EXPECT_EQ(cols[0], "a");
  EXPECT_EQ(cols[1], "b,c");
  EXPECT_EQ(cols[2], "");
  EXPECT_EQ(cols[3], "d\"\"e");
  SplitColumns("\"unterminated,x", ',', &cols);
  EXPECT_EQ(cols.size(), 1u);
}

TEST(ParseNumber, AcceptsDecimalsRefusesTheRest) {
  double v;
  EXPECT_TRUE(ParseNumber("147696.28", 0, &v));
  EXPECT_DOUBLE_EQ(v, 147696.28);
  EXPECT_TRUE(ParseNumber("-1e3", 0, &v));
  EXPECT_EQ(v, -1000);
  EXPECT_TRUE(ParseNumber("+4", 0, &v));
  EXPECT_EQ(v, 4);
  EXPECT_TRUE(ParseNumber("", 9, &v));
  EXPECT_EQ(v, 9);
  EXPECT_FALSE(ParseNumber("nan", 0, &v));
  EXPECT_FALSE(ParseNumber("inf", 0, &v));
  EXPECT_FALSE(ParseNumber("12abc", 0, &v));
  EXPECT_FALSE(ParseNumber("abc", 0, &v));
}

}  // namespace
}  // namespace pstrain::worker
