// ParquetRows (data/parquet_rows.h) on the "same rows" fixtures
// (same_rows/, written by make.mjs with parquet-wasm 0.8.0): every Parquet
// variant gives, row for row and bit for bit, the ParsedRows the text parser
// gives for rows.tsv; and those rows are what the schema says, checked
// against the TSV's text itself: an id is FeatureId of the value's text, a
// null or a missing token is the field's MissingId, a list is the bag of its
// elements (the last max_length), a null label is NaN, a null dense value the
// column's "missing".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/missing_values.h"
#include "data/parquet_rows.h"
#include "data/parser.h"
#include "data/schema.h"
#include "data/schema_file.h"

namespace pstrain::worker {
namespace {

std::string Dir() { return std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/same_rows"; }

// The data lines of rows.tsv (its header dropped).
std::vector<std::string> TsvLines() {
  std::ifstream in(Dir() + "/rows.tsv", std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(s.str(), '\n', absl::SkipEmpty());
  if (!lines.empty()) lines.erase(lines.begin());
  return lines;
}

// One row as a reader gave it: a ParsedRow, or why it is bad.
struct Row {
  ParsedRow parsed;
  std::string bad;
};

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

// What differs between two rows ("" when nothing): names the fields.
std::string Difference(const Schema& s, const Row& a, const Row& b) {
  if (!a.bad.empty() || !b.bad.empty()) {
    return a.bad.empty() == b.bad.empty() ? "" : absl::StrCat("bad: \"", a.bad, "\" / \"", b.bad, "\"");
  }
  const ParsedRow& x = a.parsed;
  const ParsedRow& y = b.parsed;
  std::string out;
  if (Bits(x.label) != Bits(y.label)) absl::StrAppend(&out, "label ", x.label, " / ", y.label, "; ");
  for (size_t k = 0; k < x.extra_labels.size() && k < y.extra_labels.size(); ++k) {
    if (Bits(x.extra_labels[k]) != Bits(y.extra_labels[k])) {
      absl::StrAppend(&out, "label ", s.extra_labels[k].name, " ", x.extra_labels[k], " / ",
                      y.extra_labels[k], "; ");
    }
  }
  for (size_t j = 0; j < x.dense.size() && j < y.dense.size(); ++j) {
    if (Bits(x.dense[j]) != Bits(y.dense[j])) {
      absl::StrAppend(&out, "dense ", s.dense[j].name, " ", x.dense[j], " / ", y.dense[j], "; ");
    }
  }
  if (x.extra_labels.size() != y.extra_labels.size() || x.dense.size() != y.dense.size()) {
    absl::StrAppend(&out, "sizes differ; ");
  }
  for (int f = 0; f < s.num_sparse; ++f) {
    const std::vector<uint64_t> ix(x.ids.begin() + x.field_begin(f), x.ids.begin() + x.field_end[f]);
    const std::vector<uint64_t> iy(y.ids.begin() + y.field_begin(f), y.ids.begin() + y.field_end[f]);
    if (ix != iy) {
      absl::StrAppend(&out, "ids of ", s.sparse[f].name, " [", absl::StrJoin(ix, ","), "] / [",
                      absl::StrJoin(iy, ","), "]; ");
    }
  }
  return out;
}

class SameRows : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<SchemaFile> schema =
        LoadSchemaFile(Dir() + "/tsv.json", {Dir() + "/rows.tsv"}, 0);
    ASSERT_TRUE(schema.ok()) << schema.status();
    tsv_schema_ = new Schema(schema->schema);
    absl::StatusOr<std::unique_ptr<const Parser>> parser = CreateParser(*tsv_schema_);
    ASSERT_TRUE(parser.ok()) << parser.status();
    lines_ = new std::vector<std::string>(TsvLines());
    tsv_rows_ = new std::vector<Row>(lines_->size());
    for (size_t i = 0; i < lines_->size(); ++i) {
      const absl::Status st = (*parser)->Parse((*lines_)[i], &(*tsv_rows_)[i].parsed);
      if (!st.ok()) (*tsv_rows_)[i].bad = std::string(st.message());
    }
  }
  static void TearDownTestSuite() {
    delete tsv_rows_;
    delete lines_;
    delete tsv_schema_;
  }

  // Every row of `variant`.parquet through parquet.json.
  static void ReadParquet(const std::string& variant, Schema* schema, std::vector<Row>* rows) {
    const std::string path = Dir() + "/" + variant + ".parquet";
    absl::StatusOr<SchemaFile> s = LoadSchemaFile(Dir() + "/parquet.json", {path}, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->schema.parquet);
    *schema = s->schema;
    ParquetRows reader(*schema);
    ASSERT_TRUE(reader.Open(path, 0, std::numeric_limits<uint64_t>::max()).ok());
    rows->clear();
    Row row;
    while (true) {
      absl::StatusOr<bool> more = reader.Next(&row.parsed, &row.bad);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      rows->push_back(row);
    }
  }

  static Schema* tsv_schema_;
  static std::vector<std::string>* lines_;
  static std::vector<Row>* tsv_rows_;
};

Schema* SameRows::tsv_schema_ = nullptr;
std::vector<std::string>* SameRows::lines_ = nullptr;
std::vector<Row>* SameRows::tsv_rows_ = nullptr;

TEST_F(SameRows, EveryVariantGivesTheTextParsersRowsBitForBit) {
  ASSERT_EQ(tsv_rows_->size(), 900u);
  for (const char* variant : {"snappy_dict", "zstd_dict", "snappy_plain", "zstd_plain",
                              "gzip_dict", "none_v2", "zstd_dict_row_groups",
                              "zstd_lists_as_text"}) {
    SCOPED_TRACE(variant);
    Schema schema;
    std::vector<Row> rows;
    ReadParquet(variant, &schema, &rows);
    ASSERT_EQ(rows.size(), tsv_rows_->size());
    int differing = 0, bad = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      bad += !rows[i].bad.empty();
      const std::string diff = Difference(schema, (*tsv_rows_)[i], rows[i]);
      if (!diff.empty() && ++differing <= 5) {
        ADD_FAILURE() << variant << ": data row " << i << " (rows.tsv line " << i + 2
                      << "): TSV / Parquet: " << diff << "\n  the line: " << (*lines_)[i];
      }
    }
    EXPECT_EQ(differing, 0) << variant << ": rows that differ";
    EXPECT_EQ(bad, 2) << "the two rows of +-Infinity";
  }
}

// The rows of one variant against the TSV's text, by the schema's rules.
TEST_F(SameRows, RowsAreWhatTheSchemaSaysOfTheText) {
  Schema s;
  std::vector<Row> rows;
  ReadParquet("snappy_dict", &s, &rows);
  ASSERT_EQ(rows.size(), lines_->size());
  ASSERT_EQ(s.num_sparse, 5);
  ASSERT_EQ(s.num_dense, 4);
  const MissingTokens missing(s.missing_tokens);
  // Columns of rows.tsv.
  enum { kClicked, kConverted, kPrice, kDwell, kAge, kCtr, kUser, kItem, kCity, kTags, kHistory };
  // Coverage of the fixture: these cases occur.
  int null_labels = 0, missing_cities = 0, empty_bags = 0, cut_histories = 0, null_ages = 0,
      nan_prices = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("data row ", i, ": ", (*lines_)[i]));
    const std::vector<std::string> t = absl::StrSplit((*lines_)[i], '\t');
    ASSERT_EQ(t.size(), 12u);
    const Row& r = rows[i];
    if (t[kPrice] == "Infinity" || t[kPrice] == "-Infinity") {
      EXPECT_NE(r.bad.find("\"price\": not a number"), std::string::npos) << r.bad;
      continue;
    }
    ASSERT_EQ(r.bad, "");
    const ParsedRow& p = r.parsed;
    EXPECT_EQ(p.label, t[kClicked] == "1" ? 1.0f : 0.0f);
    ASSERT_EQ(p.extra_labels.size(), 1u);
    if (t[kConverted].empty()) {
      EXPECT_TRUE(std::isnan(p.extra_labels[0]));
      ++null_labels;
    } else {
      EXPECT_EQ(p.extra_labels[0], std::stof(t[kConverted]));
    }
    if (t[kPrice] == "NaN") {
      EXPECT_EQ(Bits(p.dense[0]), Bits(MissingValue(s.dense[0])));
      ++nan_prices;
    }
    if (t[kAge].empty()) {
      EXPECT_EQ(p.dense[2], static_cast<float>(std::log1p(30.0))) << "its \"missing\": 30";
      ++null_ages;
    } else {
      EXPECT_EQ(Bits(p.dense[2]), Bits(ApplyTransform(s.dense[2], std::stod(t[kAge]))));
    }
    // The ids of field f: its tokens' FeatureIds (the last `keep`), or the
    // missing id.
    const auto expect_ids = [&](int f, const std::string& text, char sep, size_t keep) {
      const int field = HashField(s.sparse[f], f);
      const uint64_t buckets = s.sparse[f].hash_buckets;
      std::vector<uint64_t> want;
      const std::vector<std::string> tokens =
          sep == 0 ? std::vector<std::string>{text}
                   : std::vector<std::string>(absl::StrSplit(text, sep));
      for (const std::string& tok : tokens) {
        if (!missing.Contains(tok)) want.push_back(FeatureId(field, tok, buckets));
      }
      if (want.size() > keep) want.erase(want.begin(), want.end() - keep);
      if (want.empty()) want.push_back(MissingId(field, buckets));
      const std::vector<uint64_t> got(p.ids.begin() + p.field_begin(f), p.ids.begin() + p.field_end[f]);
      EXPECT_EQ(got, want) << s.sparse[f].name;
    };
    expect_ids(0, t[kUser], 0, 1);
    expect_ids(1, t[kItem], 0, 1);
    expect_ids(2, t[kCity], 0, 1);
    expect_ids(3, t[kTags], '|', 1000);
    expect_ids(4, t[kHistory], '|', 5);
    missing_cities += missing.Contains(t[kCity]);
    empty_bags += t[kTags].empty();
    cut_histories += std::count(t[kHistory].begin(), t[kHistory].end(), '|') >= 5;
  }
  std::printf("rows with: no converted label %d, missing city %d, no tags %d, a history cut "
              "to 5 %d, no age %d, NaN price %d\n", null_labels, missing_cities, empty_bags,
              cut_histories, null_ages, nan_prices);
  // The history's ids are the item column's (ids_like): one table.
  EXPECT_EQ(HashField(s.sparse[4], 4), 1);
  EXPECT_GT(null_labels, 100);
  EXPECT_GT(missing_cities, 50);
  EXPECT_GT(empty_bags, 50);
  EXPECT_GT(cut_histories, 50);
  EXPECT_GT(null_ages, 50);
  EXPECT_GT(nan_prices, 5);
}

}  // namespace
}  // namespace pstrain::worker
