// Parquet input through the real binary: the same rows as TSV and as Parquet
// (snappy, zstd, gzip, none; dictionary and plain; v1 and v2 data pages;
// several row groups; lists written as LIST columns or as '|'-joined
// strings) train to byte-identical parameters after one epoch with the same
// seed. The fixtures, their writer (parquet-wasm 0.8.0, an independent
// implementation) and the two schema files are in
// tests/data/parquet/same_rows/ (make.mjs says what the rows hold).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

const std::string& FixtureDir() {
  static const std::string* const kDir =
      new std::string(std::string(PSTRAIN_SOURCE_DIR) + "/tests/data/parquet/same_rows");
  return *kDir;
}

// Two heads (the schema's "clicked" and "converted", the latter missing on
// most rows) over every input: the dense columns, each categorical column's
// pooled embedding and the history attended against the candidate item.
constexpr const char* kModel = R"({
  "name": "two_heads",
  "layers": [
    {"name": "bottom", "type": "mlp", "input": "dense", "widths": [8], "relu_last": true},
    {"name": "interest", "type": "target_attention", "sequence": "history", "input": "item_id",
     "widths": [8]},
    {"name": "shared", "type": "mlp",
     "inputs": ["bottom", "interest", "item_id", "user", "city", "tags"], "widths": [16],
     "relu_last": true},
    {"name": "click_tower", "type": "mlp", "input": "shared", "widths": [1], "tower": true},
    {"name": "convert_tower", "type": "mlp", "input": "shared", "widths": [1], "tower": true}
  ],
  "heads": [
    {"name": "click", "input": "click_tower", "label": "clicked"},
    {"name": "convert", "input": "convert_tower", "label": "converted"}
  ]
})";

// The table files of a model folder, by name.
std::map<std::string, std::string> TableFiles(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".tbl") files[e.path().filename().string()] = ReadFile(e.path().string());
  }
  return files;
}

// What one `pstrain train` did: its exit code, samples and bad lines (from
// "trained N steps, M samples in ... K bad lines)"), its tables.
struct Trained {
  int code = -1;
  int64_t samples = -1, bad = -1;
  std::map<std::string, std::string> tables;
};

// `pstrain train` on `data` with `schema` (a file of the fixture folder),
// one epoch in file order, the model saved to `dir`/`tag`.
Trained Train(const std::string& dir, const std::string& tag, const std::string& schema,
              const std::string& data) {
  Trained t;
  std::string out;
  t.code = RunPstrain({"train", "--schema=" + FixtureDir() + "/" + schema, "--train_data=" + data,
                       "--model_file=" + dir + "/two_heads.json", "--seed=7", "--epochs=1",
                       "--batch_size=64", "--shuffle_buffer=0", "--log_every_secs=60",
                       "--save_model=" + dir + "/" + tag},
                      dir + "/" + tag + ".log", &out, absl::Seconds(120));
  std::smatch m;
  static const std::regex kTrained(R"(trained \d+ steps, (\d+) samples in [^\n]*?(\d+) bad lines)");
  if (std::regex_search(out, m, kTrained)) {
    t.samples = std::stoll(m[1]);
    t.bad = std::stoll(m[2]);
  }
  if (t.code == 0) t.tables = TableFiles(dir + "/" + tag);
  return t;
}

// Where two table files first differ, for the failure message.
std::string FirstDifference(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return absl::StrCat(a.size(), " bytes against ", b.size());
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  return absl::StrCat("first at byte ", i, " of ", a.size());
}

class ParquetInput : public ::testing::TestWithParam<std::string> {
 protected:
  // The TSV is trained once, the reference of every variant.
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("parquet-input"));
    std::FILE* f = std::fopen((*dir_ + "/two_heads.json").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kModel, f);
    std::fclose(f);
    tsv_ = new Trained(Train(*dir_, "tsv", "tsv.json", FixtureDir() + "/rows.tsv"));
  }
  static void TearDownTestSuite() {
    if (!::testing::UnitTest::GetInstance()->Failed()) std::filesystem::remove_all(*dir_);
    delete tsv_;
    delete dir_;
  }

  static std::string* dir_;
  static Trained* tsv_;
};

std::string* ParquetInput::dir_ = nullptr;
Trained* ParquetInput::tsv_ = nullptr;

TEST_P(ParquetInput, TrainsTheParametersOfTheSameRowsAsTsv) {
  ASSERT_EQ(tsv_->code, 0) << "the TSV run failed; its log: " << *dir_ << "/tsv.log";
  // rows.tsv: a header and 900 rows, two of them (+-Infinity in a dense
  // column) bad lines in text and bad rows in Parquet.
  const std::vector<std::string> lines =
      absl::StrSplit(ReadFile(FixtureDir() + "/rows.tsv"), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 901u);
  EXPECT_EQ(tsv_->samples, 898);
  EXPECT_EQ(tsv_->bad, 2);
  ASSERT_GT(tsv_->tables.size(), 10u);

  const std::string variant = GetParam();
  const Trained pq = Train(*dir_, variant, "parquet.json",
                           absl::StrCat(FixtureDir(), "/", variant, ".parquet"));
  ASSERT_EQ(pq.code, 0) << variant;
  std::printf("%s: %lld samples, %lld bad rows; TSV: %lld samples, %lld bad lines\n",
              variant.c_str(), static_cast<long long>(pq.samples), static_cast<long long>(pq.bad),
              static_cast<long long>(tsv_->samples), static_cast<long long>(tsv_->bad));
  EXPECT_EQ(pq.samples, tsv_->samples) << "every row the TSV trained on";
  EXPECT_EQ(pq.bad, tsv_->bad);
  // Same tables, same bytes.
  ASSERT_EQ(pq.tables.size(), tsv_->tables.size());
  int same = 0;
  for (const auto& [table, bytes] : tsv_->tables) {
    const auto it = pq.tables.find(table);
    ASSERT_NE(it, pq.tables.end()) << variant << " saved no " << table;
    if (it->second == bytes) {
      ++same;
    } else {
      ADD_FAILURE() << variant << ": table " << table << " differs from the TSV's ("
                    << FirstDifference(bytes, it->second) << ")";
    }
  }
  std::printf("%s: %d of %zu tables byte-identical to the TSV's\n", variant.c_str(), same,
              tsv_->tables.size());
  if (!HasFailure()) std::filesystem::remove_all(*dir_ + "/" + variant);
}

INSTANTIATE_TEST_SUITE_P(SameRows, ParquetInput,
                         ::testing::Values("snappy_dict", "zstd_dict", "snappy_plain",
                                           "zstd_plain", "gzip_dict", "none_v2",
                                           "zstd_dict_row_groups", "zstd_lists_as_text"));

// The Parquet schema is the TSV's with "format": "parquet": nothing else
// changes (the list columns keep "multi_hot", which max_length needs).
TEST(ParquetInputSchema, DiffersFromTheTsvSchemaOnlyInFormat) {
  const auto entries = [](const std::string& file) {
    const std::vector<std::string> lines =
        absl::StrSplit(ReadFile(FixtureDir() + "/" + file), '\n');
    std::string kept;
    for (const std::string& line : lines) {
      if (line.find("//") == std::string::npos) absl::StrAppend(&kept, line, "\n");
    }
    return kept;
  };
  const std::string tsv = entries("tsv.json");
  ASSERT_NE(tsv.find(R"("format": "tsv")"), std::string::npos);
  EXPECT_EQ(absl::StrReplaceAll(tsv, {{R"("format": "tsv")", R"("format": "parquet")"}}),
            entries("parquet.json"));
}

// A stream of Parquet partitions (snappy, zstd, several row groups; each
// with its _SUCCESS marker) trains each partition's rows once, as the same
// rows written as TSV partitions do: the partition lines' row counts match.
TEST(ParquetStream, PartitionsOfParquetFilesTrainEveryRowOnceAsTheTsvDoes) {
  const std::string dir = MakeTempDir("pstrain-parquet-stream");
  const std::vector<std::string> variants = {"snappy_dict", "zstd_dict", "zstd_dict_row_groups"};
  std::map<std::string, std::map<std::string, std::string>> rows;  // format -> partition -> rows
  for (const std::string format : {"tsv", "parquet"}) {
    const std::string stream = dir + "/" + format;
    for (size_t k = 0; k < variants.size(); ++k) {
      const std::string part = absl::StrCat(stream, "/2026-12-01/0", k);
      std::filesystem::create_directories(part);
      const std::string from =
          format == "tsv" ? FixtureDir() + "/rows.tsv" : FixtureDir() + "/" + variants[k] + ".parquet";
      std::filesystem::copy_file(from, part + "/part-0." + format);
      std::ofstream(part + "/_SUCCESS").put('\n');
    }
    std::string log;
    ASSERT_EQ(RunPstrain({"local", "--servers=1", "--workers=2",
                          "--schema=" + FixtureDir() + "/" + format + ".json",
                          "--train_stream=" + stream, "--stream_end=2026-12-01/02",
                          "--stream_poll_secs=0.1", "--batch_size=64", "--timeout=120",
                          "--metrics_out=" + dir + "/" + format + ".jsonl"},
                         dir + "/" + format + ".log", &log, absl::Minutes(2)),
              0)
        << log;
    const std::string metrics = ReadFile(dir + "/" + format + ".jsonl");
    const std::regex line_re(
        "\"event\":\"partition\",\"partition\":\"([^\"]+)\".*?\"rows\":([0-9]+),\"rows_scored\":([0-9]+)");
    for (std::sregex_iterator it(metrics.begin(), metrics.end(), line_re), end; it != end; ++it) {
      EXPECT_EQ((*it)[2].str(), (*it)[3].str()) << format << " " << (*it)[1] << ": every row scored";
      rows[format][(*it)[1].str()] = (*it)[2].str();
    }
  }
  ASSERT_EQ(rows["parquet"].size(), variants.size());
  EXPECT_EQ(rows["parquet"], rows["tsv"]);
  std::printf("rows per partition: %s\n", rows["parquet"].begin()->second.c_str());
  EXPECT_GT(std::stoi(rows["parquet"].begin()->second), 800);
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing

namespace pstrain::testing {
namespace {

// A table file's rows (after its 32-byte header, whose bytes 24-31 count
// them), sorted: its content whatever the order it lists them in.
std::vector<std::string> SortedRows(const std::string& table) {
  std::vector<std::string> rows;
  if (table.size() < 32) return rows;
  uint64_t n = 0;
  std::memcpy(&n, table.data() + 24, sizeof(n));
  if (n == 0 || (table.size() - 32) % n != 0) return {table};
  const size_t each = (table.size() - 32) / n;
  for (uint64_t r = 0; r < n; ++r) rows.push_back(table.substr(32 + r * each, each));
  std::sort(rows.begin(), rows.end());
  return rows;
}

// A checkpoint of a job reading Parquet names the file, row group and row
// its worker's next row is at; a restore reads from there (the row groups
// before it are not read) and trains the rows left, to the parameters of
// the unbroken job (BSP, one worker: the same steps in the same order).
TEST(ParquetResume, StartsAtTheRowGroupAndRowTheCheckpointNames) {
  const std::string dir = MakeTempDir("pstrain-parquet-resume");
  const std::string data = FixtureDir() + "/zstd_dict_row_groups.parquet";  // 250, 250, 250, 150 rows
  auto run = [&](const std::string& tag, const std::vector<std::string>& extra, std::string* out) {
    std::vector<std::string> args = {
        "local", "--v=1", "--servers=1", "--workers=1", "--model=lr", "--consistency=bsp",
        "--schema=" + FixtureDir() + "/parquet.json", "--train_data=" + data, "--batch_size=64",
        "--seed=7", "--epochs=1", "--timeout=60", "--checkpoint_dir=" + dir + "/" + tag,
        "--save_model=" + dir + "/" + tag + "/model"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunPstrain(args, dir + "/" + tag + ".log", out, absl::Seconds(90));
  };
  std::string out;
  ASSERT_EQ(run("whole", {"--checkpoint_every_steps=5"}, &out), 0) << out;
  std::smatch m;
  const std::regex trained(R"(trained \d+ steps, (\d+) samples)");
  ASSERT_TRUE(std::regex_search(out, m, trained)) << out;
  const int64_t samples = std::stoll(m[1]);  // the good rows
  const std::string ckpt = dir + "/whole/ckpt-000000005";
  const std::string manifest = ReadFile(ckpt + "/manifest.json");
  EXPECT_NE(manifest.find("\"data_position\""), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"row_group\": 1"), std::string::npos) << manifest;
  // 5 batches of 64 good rows: 321 rows, one bad among them (its label is null).
  EXPECT_NE(manifest.find("\"row\": 71"), std::string::npos) << manifest;
  std::string inspect;
  ASSERT_EQ(RunPstrain({"ckpt", "inspect", ckpt}, dir + "/inspect.log", &inspect, absl::Seconds(30)), 0)
      << inspect;
  EXPECT_NE(inspect.find("worker 0: clock 5, epoch 0, 320 rows, next row at " + data +
                         ", row group 1, row 71"),
            std::string::npos)
      << inspect;

  // The way a resume read before (and still does with several reader
  // threads or a shuffle buffer): every row from the epoch's start, the
  // trained ones skipped.
  ASSERT_EQ(run("replayed", {"--restore=" + ckpt, "--reader_threads=2"}, &out), 0) << out;
  EXPECT_NE(out.find("resuming at step 5 (epoch 0, 320 rows skipped"), std::string::npos) << out;
  ASSERT_EQ(run("resumed", {"--restore=" + ckpt}, &out), 0) << out;
  EXPECT_NE(out.find("resuming at step 5 (epoch 0): reading from " + data +
                     ", row group 1, row 71, the 320 rows before it not read again"),
            std::string::npos)
      << out;
  ASSERT_TRUE(std::regex_search(out, m, trained)) << out;
  EXPECT_EQ(std::stoll(m[1]), samples - 320);
  const auto whole = TableFiles(dir + "/whole/model"), resumed = TableFiles(dir + "/resumed/model"),
             replayed = TableFiles(dir + "/replayed/model");
  ASSERT_FALSE(whole.empty());
  ASSERT_EQ(whole.size(), resumed.size());
  ASSERT_EQ(replayed.size(), resumed.size());
  for (const auto& [name, bytes] : whole) {
    // The same files as the replayed resume's, byte for byte; the unbroken
    // job's rows, in another order (a restored table lists its rows in
    // another order than one grown row by row).
    EXPECT_TRUE(replayed.at(name) == resumed.at(name))
        << name << ": " << FirstDifference(replayed.at(name), resumed.at(name));
    EXPECT_EQ(SortedRows(bytes), SortedRows(resumed.at(name))) << name;
  }
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
