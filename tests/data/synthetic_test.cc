#include "data/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "data/batch_builder.h"
#include "data/delimited_parser.h"
#include "data/eval/metrics.h"
#include "data/reader.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ReadFile;
using testing_util::ScratchDir;

SyntheticOptions SmallOptions(int64_t rows, uint64_t seed = 5) {
  SyntheticOptions o;
  o.rows = rows;
  o.seed = seed;
  return o;
}

std::vector<std::string> Lines(const std::string& content) {
  std::vector<std::string> lines;
  std::istringstream in(content);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(WriteSynthetic, IsDeterministicForASeedAndRowsArePrefixStable) {
  ScratchDir dir;
  ASSERT_TRUE(WriteSynthetic(SmallOptions(3000), dir.File("a.tsv")).ok());
  ASSERT_TRUE(WriteSynthetic(SmallOptions(3000), dir.File("b.tsv")).ok());
  ASSERT_TRUE(WriteSynthetic(SmallOptions(1000), dir.File("prefix.tsv")).ok());
  ASSERT_TRUE(WriteSynthetic(SmallOptions(3000, 6), dir.File("other.tsv")).ok());
  std::string a = ReadFile(dir.File("a.tsv"));
  EXPECT_EQ(a, ReadFile(dir.File("b.tsv")));
  EXPECT_EQ(a.substr(0, ReadFile(dir.File("prefix.tsv")).size()), ReadFile(dir.File("prefix.tsv")));
  EXPECT_NE(a, ReadFile(dir.File("other.tsv")));
  EXPECT_EQ(Lines(a).size(), 3000u);
}

TEST(WriteSynthetic, WritesValidCriteoRowsThatTheReaderParses) {
  ScratchDir dir;
  absl::StatusOr<SyntheticReport> report = WriteSynthetic(SmallOptions(5000), dir.File("a.tsv"));
  ASSERT_TRUE(report.ok()) << report.status();
  ReaderOptions ro;
  ro.patterns = {dir.File("a.tsv")};
  ro.max_bad_lines_fraction = 0;
  absl::StatusOr<std::shared_ptr<const Batch>> batch = ReadAll(ro);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ((*batch)->size, 5000);
  EXPECT_EQ(report->bytes, ReadFile(dir.File("a.tsv")).size());
  // Criteo-like: some empty tokens and integers, some negative integers.
  int empty_tokens = 0, empty_ints = 0, negative = 0;
  for (const std::string& line : Lines(ReadFile(dir.File("a.tsv")))) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    while (cols.size() < 40) cols.push_back("");  // getline drops trailing empties
    for (int j = 1; j <= 13; ++j) {
      empty_ints += cols[j].empty();
      negative += !cols[j].empty() && cols[j][0] == '-';
    }
    for (int f = 14; f < 40; ++f) {
      empty_tokens += cols[f].empty();
      if (!cols[f].empty()) {
        EXPECT_EQ(cols[f].size(), 8u);
      }
    }
  }
  EXPECT_GT(empty_tokens, 0);
  EXPECT_GT(empty_ints, 0);
  EXPECT_GT(negative, 0);
}

TEST(WriteSynthetic, ReportedOracleMatchesRecomputationFromTheFile) {
  ScratchDir dir;
  SyntheticOptions o = SmallOptions(20000);
  absl::StatusOr<SyntheticReport> report = WriteSynthetic(o, dir.File("a.tsv"));
  ASSERT_TRUE(report.ok()) << report.status();
  std::unique_ptr<SyntheticWorld> world = *SyntheticWorld::Create(o);
  std::vector<double> probs;
  std::vector<float> labels;
  SyntheticRow row;
  for (const std::string& line : Lines(ReadFile(dir.File("a.tsv")))) {
    ASSERT_TRUE(world->ParseRow(line, &row).ok()) << line;
    probs.push_back(row.probability);
    labels.push_back(row.label);
  }
  ASSERT_EQ(probs.size(), 20000u);
  EXPECT_EQ(RocAuc(probs, labels), report->oracle_auc);
  EXPECT_EQ(LogLoss(probs, labels), report->oracle_logloss);
  double pos = 0;
  for (float l : labels) pos += l;
  EXPECT_DOUBLE_EQ(pos / labels.size(), report->positive_rate);
}

TEST(WriteSynthetic, DefaultWorldHasCriteoLikeDifficulty) {
  ScratchDir dir;
  absl::StatusOr<SyntheticReport> r = WriteSynthetic(SmallOptions(50000, 1), dir.File("a.tsv"));
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf("[ synth    ] 50k rows: positive rate %.4f, oracle AUC %.4f, logloss %.4f\n",
              r->positive_rate, r->oracle_auc, r->oracle_logloss);
  EXPECT_GT(r->positive_rate, 0.2);
  EXPECT_LT(r->positive_rate, 0.3);
  EXPECT_GT(r->oracle_auc, 0.78);
  EXPECT_LT(r->oracle_auc, 0.86);
}

TEST(SyntheticWorld, VocabulariesSpanTenToAMillion) {
  std::unique_ptr<SyntheticWorld> world = *SyntheticWorld::Create(SmallOptions(0));
  uint32_t lo = ~0u, hi = 0;
  for (int f = 0; f < 26; ++f) {
    lo = std::min(lo, world->vocab_size(f));
    hi = std::max(hi, world->vocab_size(f));
  }
  EXPECT_EQ(lo, 10u);
  EXPECT_EQ(hi, 1000000u);
}

TEST(SyntheticWorld, ParseRowInvertsFormatRow) {
  std::unique_ptr<SyntheticWorld> world = *SyntheticWorld::Create(SmallOptions(0));
  SyntheticRow row, back;
  for (int r = 0; r < 200; ++r) {
    world->SampleRow(r, &row);
    std::string line;
    world->FormatRow(row, &line);
    ASSERT_EQ(line.back(), '\n');
    line.pop_back();
    ASSERT_TRUE(world->ParseRow(line, &back).ok());
    EXPECT_EQ(back.label, row.label);
    EXPECT_EQ(back.dense, row.dense);
    EXPECT_EQ(back.dense_empty, row.dense_empty);
    EXPECT_EQ(back.tokens, row.tokens);
    EXPECT_EQ(back.token_empty, row.token_empty);
    EXPECT_EQ(back.probability, row.probability);
  }
  EXPECT_EQ(world->ParseRow("1\t2", &back).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GenerateBatch, EqualsParsingTheWrittenFile) {
  ScratchDir dir;
  SyntheticOptions o = SmallOptions(2500);
  ASSERT_TRUE(WriteSynthetic(o, dir.File("a.tsv")).ok());
  std::unique_ptr<SyntheticWorld> world = *SyntheticWorld::Create(o);
  for (uint64_t buckets : {uint64_t{0}, uint64_t{1000}}) {
    Schema schema;
    schema.hash_buckets = buckets;
    ReaderOptions ro;
    ro.patterns = {dir.File("a.tsv")};
    ro.schema = schema;
    std::shared_ptr<const Batch> read = *ReadAll(ro);
    std::shared_ptr<const Batch> generated = *GenerateBatch(*world, 0, 2500, schema);
    EXPECT_TRUE(BatchesEqual(*read, *generated));
    // Any row range on its own equals the same rows of the whole.
    std::shared_ptr<const Batch> middle = *GenerateBatch(*world, 1000, 300, schema);
    EXPECT_TRUE(BatchesEqual(*middle, SliceBatch(*read, 1000, 1300)));
  }
  Schema wrong;
  wrong.num_dense = 3;
  EXPECT_EQ(GenerateBatch(*world, 0, 10, wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SyntheticOptions, InvalidOptionsAreRejected) {
  SyntheticOptions o;
  o.zipf = 0;
  EXPECT_EQ(SyntheticWorld::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SyntheticOptions{};
  o.min_vocab = 100;
  o.max_vocab = 10;
  EXPECT_EQ(SyntheticWorld::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SyntheticOptions{};
  o.target_positive_rate = 1;
  EXPECT_EQ(WriteSynthetic(o, "/tmp/never").status().code(), absl::StatusCode::kInvalidArgument);
  o = SyntheticOptions{};
  o.new_id_rate = 1.5;
  EXPECT_EQ(SyntheticWorld::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SyntheticWorld, NewIdRateAddsTokensSeenOnce) {
  // In the largest field (a million values) most tokens repeat in 20000
  // rows at Zipf 1.1; with new_id_rate 0.3 many more are singletons.
  auto singletons = [](double rate) {
    SyntheticOptions o = SmallOptions(0);
    o.new_id_rate = rate;
    std::unique_ptr<SyntheticWorld> world = *SyntheticWorld::Create(o);
    int field = 0;
    for (int f = 0; f < 26; ++f) {
      if (world->vocab_size(f) > world->vocab_size(field)) field = f;
    }
    std::map<uint32_t, int> seen;
    int tokens = 0;
    SyntheticRow row;
    for (int64_t r = 0; r < 20000; ++r) {
      world->SampleRow(r, &row);
      if (row.token_empty[field]) continue;
      ++seen[row.tokens[field]];
      ++tokens;
    }
    int once = 0;
    for (const auto& [token, n] : seen) once += n == 1;
    return static_cast<double>(once) / tokens;
  };
  const double base = singletons(0), fresh = singletons(0.3);
  EXPECT_GT(fresh, base + 0.15) << base << " " << fresh;  // measured: 0.27 -> 0.50
}

TEST(SyntheticShapes, OtherShapesWork) {
  ScratchDir dir;
  SyntheticOptions o = SmallOptions(3000);
  o.num_dense = 0;
  o.num_sparse = 3;
  absl::StatusOr<SyntheticReport> r = WriteSynthetic(o, dir.File("a.tsv"));
  ASSERT_TRUE(r.ok()) << r.status();
  ReaderOptions ro;
  ro.patterns = {dir.File("a.tsv")};
  ro.schema.num_dense = 0;
  ro.schema.num_sparse = 3;
  EXPECT_EQ((*ReadAll(ro))->size, 3000);
  EXPECT_NEAR(r->positive_rate, 0.25, 0.05);
}

TEST(WriteSynthetic, UnwritablePathIsAnError) {
  absl::StatusOr<SyntheticReport> r =
      WriteSynthetic(SmallOptions(10), "/nonexistent-dir/pstrain/a.tsv");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

// Prints generation and reading rates; asserts only correctness.
TEST(SyntheticSpeed, ReportsGeneratorAndReaderRowsPerSecond) {
  ScratchDir dir;
  const int64_t rows = 200000;
  absl::StatusOr<SyntheticReport> r = WriteSynthetic(SmallOptions(rows), dir.File("a.tsv"));
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf("[ synth    ] %lld rows written at %.0f rows/s (%.1f MB)\n",
              static_cast<long long>(rows), rows / r->seconds, r->bytes / 1e6);
  ReaderOptions ro;
  ro.patterns = {dir.File("a.tsv")};
  ro.batch_size = 4096;
  auto reader = *DataReader::Open(ro);
  int64_t seen = 0;
  while (true) {
    std::shared_ptr<const Batch> b = *reader->Next();
    if (b == nullptr) break;
    seen += b->size;
  }
  EXPECT_EQ(seen, rows);
  ReaderStats stats = reader->stats();
  std::printf("[ reader   ] %lld rows, %.0f rows/s of reader-thread busy time\n",
              static_cast<long long>(stats.rows), stats.rows_per_busy_second);
}

}  // namespace
}  // namespace pstrain::worker
