// Compressed input: gzip and zstd files read as their text, told by
// content; corrupt or truncated data is an error naming the file.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "data/compress_file.h"
#include "data/data_check.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "data/shard_scanner.h"
#include "data/synthetic.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ReadFile;
using testing_util::ScratchDir;
using testing_util::WriteFile;

using Row = std::tuple<float, std::vector<float>, std::vector<uint64_t>, std::vector<uint32_t>>;

std::string Pack(const std::string& text, Compression c) {
  absl::StatusOr<std::string> packed = CompressBytes(text, c, c == Compression::kGzip ? -1 : 3);
  EXPECT_TRUE(packed.ok()) << packed.status();
  return packed.ok() ? *packed : std::string();
}

// Every good row of the files matching `pattern`, one shard of one; the
// scan's error, if any, in `*error`.
std::vector<Row> ScanRows(const std::string& pattern, absl::Status* error = nullptr,
                          int64_t* bad_lines = nullptr) {
  std::vector<Row> rows;
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({pattern});
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return rows;
  std::vector<FileRange> ranges = ShardRanges(*files, 0, 1);
  ScannerOptions options;
  options.schema.max_line_bytes = 8192;
  options.io_buffer_bytes = 4096;  // a 16 KiB buffer: many refills
  options.max_bad_lines_fraction = 0.5;
  auto scanner = ShardScanner::Create(*files, std::move(ranges), options);
  EXPECT_TRUE(scanner.ok()) << scanner.status();
  ParsedRow row;
  while (true) {
    absl::StatusOr<bool> more = (*scanner)->NextRow(&row);
    if (!more.ok()) {
      if (error != nullptr) *error = more.status();
      EXPECT_NE(error, nullptr) << more.status();
      break;
    }
    if (!*more) break;
    rows.emplace_back(row.label, row.dense, row.ids, row.field_end);
  }
  if (bad_lines != nullptr) *bad_lines = (*scanner)->bad_lines();
  return rows;
}

// All lines of `file` (whole range) as (offset, text, overlong, line number).
struct ReadLine {
  uint64_t offset;
  std::string text;
  bool overlong;
  int64_t number;
  bool operator==(const ReadLine& o) const {
    return std::tie(offset, text, overlong, number) ==
           std::tie(o.offset, o.text, o.overlong, o.number);
  }
};
absl::StatusOr<std::vector<ReadLine>> ReadLines(const InputFile& file, size_t buffer,
                                                size_t max_line) {
  LineReader reader(buffer, max_line);
  absl::Status st = reader.Open(file, 0, file.size);
  if (!st.ok()) return st;
  std::vector<ReadLine> out;
  LineReader::Line line;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) return out;
    out.push_back({line.offset, std::string(line.text), line.overlong, *reader.LineNumber(line)});
  }
}

// The lines a plain reader gives for `text`.
std::vector<ReadLine> PlainLines(const ScratchDir& dir, const std::string& text, size_t max_line) {
  WriteFile(dir.File("plain.txt"), text);
  absl::StatusOr<std::vector<ReadLine>> lines =
      ReadLines(InputFile{dir.File("plain.txt"), text.size()}, 1 << 16, max_line);
  EXPECT_TRUE(lines.ok()) << lines.status();
  return lines.ok() ? *lines : std::vector<ReadLine>();
}

class CompressedInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticOptions w;
    w.rows = 3000;
    ASSERT_TRUE(WriteSynthetic(w, dir_.File("train.tsv")).ok());
    text_ = ReadFile(dir_.File("train.tsv"));
  }

  ScratchDir dir_;
  std::string text_;
};

TEST_F(CompressedInputTest, PlainGzipZstdAndUnnamedGzipGiveIdenticalRows) {
  WriteFile(dir_.File("train.tsv.gz"), Pack(text_, Compression::kGzip));
  WriteFile(dir_.File("train.tsv.zst"), Pack(text_, Compression::kZstd));
  WriteFile(dir_.File("train.bin"), Pack(text_, Compression::kGzip));  // told by content

  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir_.File("train.*")});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 4u);
  EXPECT_EQ((*files)[0].compression, Compression::kGzip);  // train.bin
  EXPECT_EQ((*files)[1].compression, Compression::kNone);  // train.tsv
  EXPECT_EQ((*files)[2].compression, Compression::kGzip);
  EXPECT_EQ((*files)[3].compression, Compression::kZstd);

  std::vector<Row> plain = ScanRows(dir_.File("train.tsv"));
  ASSERT_EQ(plain.size(), 3000u);
  EXPECT_EQ(ScanRows(dir_.File("train.tsv.gz")), plain);
  EXPECT_EQ(ScanRows(dir_.File("train.tsv.zst")), plain);
  EXPECT_EQ(ScanRows(dir_.File("train.bin")), plain);
}

TEST_F(CompressedInputTest, LinesHaveOffsetsAndNumbersOfTheDecompressedText) {
  const std::vector<ReadLine> want = PlainLines(dir_, text_, 1 << 20);
  ASSERT_EQ(want.size(), 3000u);
  EXPECT_EQ(want[0].offset, 0u);
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    WriteFile(dir_.File("f"), Pack(text_, c));
    InputFile file{dir_.File("f"), ReadFile(dir_.File("f")).size(), c};
    for (size_t buffer : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
      absl::StatusOr<std::vector<ReadLine>> got = ReadLines(file, buffer, 4096);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, want) << CompressionName(c) << " buffer " << buffer;
    }
  }
}

TEST_F(CompressedInputTest, MultiMemberGzipAndMultiFrameZstdReadAsTheirConcatenation) {
  // Cut mid-line, with an empty member / frame among them.
  const std::vector<size_t> cuts = {0, 1, 777, 777, text_.size() / 2 + 3, text_.size()};
  const std::vector<ReadLine> want = PlainLines(dir_, text_, 1 << 20);
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    std::string packed;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      packed += Pack(text_.substr(cuts[i], cuts[i + 1] - cuts[i]), c);
    }
    WriteFile(dir_.File("multi"), packed);
    absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir_.File("multi")});
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_EQ((*files)[0].compression, c);
    absl::StatusOr<std::vector<ReadLine>> got = ReadLines((*files)[0], 4096, 1 << 20);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << CompressionName(c);
  }
}

TEST_F(CompressedInputTest, LastLineWithoutNewlineCounts) {
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    WriteFile(dir_.File("f"), Pack("a\nb\nlast", c));
    InputFile file{dir_.File("f"), ReadFile(dir_.File("f")).size(), c};
    absl::StatusOr<std::vector<ReadLine>> got = ReadLines(file, 64, 32);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<ReadLine> want = {{0, "a", false, 1}, {2, "b", false, 2}, {4, "last", false, 3}};
    EXPECT_EQ(*got, want) << CompressionName(c);
  }
}

TEST_F(CompressedInputTest, OverlongLinesAreBadLinesAsInPlainFiles) {
  const std::string text = "ok1\n" + std::string(5000, 'x') + "\nok2\n" + std::string(300, 'y');
  const std::vector<ReadLine> want = {
      {0, "ok1", false, 1}, {4, "", true, 2}, {5005, "ok2", false, 3}, {5009, "", true, 4}};
  EXPECT_EQ(PlainLines(dir_, text, 100), want);
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    WriteFile(dir_.File("f"), Pack(text, c));
    InputFile file{dir_.File("f"), ReadFile(dir_.File("f")).size(), c};
    absl::StatusOr<std::vector<ReadLine>> got = ReadLines(file, 16, 100);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << CompressionName(c);
  }

  // Through the scanner: the overlong rows are counted bad, the rest parse.
  std::string rows = text_.substr(0, text_.find('\n', 10000) + 1);
  const size_t good = std::count(rows.begin(), rows.end(), '\n');
  rows += std::string(20000, '7') + "\n";  // over ScanRows' max_line_bytes
  rows += text_.substr(0, text_.find('\n') + 1);
  WriteFile(dir_.File("rows.tsv.zst"), Pack(rows, Compression::kZstd));
  int64_t bad = 0;
  EXPECT_EQ(ScanRows(dir_.File("rows.tsv.zst"), nullptr, &bad).size(), good + 1);
  EXPECT_EQ(bad, 1);
}

// The scan of a damaged file: rows before the damage, then DataLoss.
void ExpectDataLoss(const std::string& path, const std::string& what) {
  absl::Status error;
  std::vector<Row> rows = ScanRows(path, &error);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
  EXPECT_NE(error.message().find(path + ": " + what + " data at uncompressed byte "),
            std::string::npos)
      << error;
}

TEST_F(CompressedInputTest, TruncatedFilesAreDataLossNamingTheFile) {
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    const std::string packed = Pack(text_, c);
    const std::string path = dir_.File(std::string("cut.") + CompressionName(c));
    const size_t magic = c == Compression::kGzip ? 2 : 4;
    for (size_t keep : {magic + 1, packed.size() / 2, packed.size() - 1}) {
      WriteFile(path, packed.substr(0, keep));
      SCOPED_TRACE(keep);
      ExpectDataLoss(path, std::string("truncated ") + CompressionName(c));
    }
  }
}

TEST_F(CompressedInputTest, CorruptFilesAreDataLossNamingTheFile) {
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    const std::string packed = Pack(text_, c);
    const std::string path = dir_.File(std::string("bad.") + CompressionName(c));
    // A flipped byte in the data, and garbage right after the magic bytes.
    std::string flipped = packed;
    flipped[flipped.size() / 2] ^= 0x5a;
    const size_t magic = c == Compression::kGzip ? 2 : 4;
    std::string garbage = packed.substr(0, magic) + std::string(64, '\xff');
    for (const std::string& bytes : {flipped, garbage}) {
      WriteFile(path, bytes);
      ExpectDataLoss(path, std::string("corrupt ") + CompressionName(c));
    }
  }
  // Rows decoded before the damage still come out first.
  std::string packed = Pack(text_, Compression::kGzip);
  WriteFile(dir_.File("late.gz"), packed.substr(0, packed.size() * 3 / 4));
  absl::Status error;
  EXPECT_GT(ScanRows(dir_.File("late.gz"), &error).size(), 1000u);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss);
}

TEST(CompressedInput, ArbitraryBytesAfterTheMagicEndInLinesOrAnErrorNeverACrash) {
  ScratchDir dir;
  std::mt19937 rng(7);
  const std::string path = dir.File("junk");
  for (int i = 0; i < 300; ++i) {
    const Compression c = i % 2 == 0 ? Compression::kGzip : Compression::kZstd;
    std::string bytes = c == Compression::kGzip ? std::string("\x1f\x8b\x08", 3)
                                                : std::string("\x28\xb5\x2f\xfd", 4);
    const int n = static_cast<int>(rng() % 200);
    for (int k = 0; k < n; ++k) bytes += static_cast<char>(rng());
    WriteFile(path, bytes);
    absl::StatusOr<std::vector<ReadLine>> lines =
        ReadLines(InputFile{path, bytes.size(), c}, 64, 32);
    if (!lines.ok()) {
      EXPECT_TRUE(lines.status().code() == absl::StatusCode::kDataLoss) << lines.status();
      EXPECT_NE(lines.status().message().find(path), std::string::npos);
    }
  }
}

TEST_F(CompressedInputTest, DataCheckReadsGzipAndZstd) {
  WriteFile(dir_.File("a.tsv.gz"), Pack(text_, Compression::kGzip));
  WriteFile(dir_.File("b.tsv.zst"), Pack(text_, Compression::kZstd));
  DataCheckOptions options;
  options.flag = "--train_data";
  EXPECT_TRUE(CheckDataFiles({dir_.File("*.gz"), dir_.File("*.zst")}, Schema(), options).ok());
  // Compressed junk is still judged by its lines.
  WriteFile(dir_.File("junk.gz"), Pack("not\ta\trow\nnor\tthis\n", Compression::kGzip));
  absl::Status st = CheckDataFiles({dir_.File("junk.gz")}, Schema(), options);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("lines do not parse"), std::string::npos) << st;
}

TEST_F(CompressedInputTest, DataCheckRefusesUndecodableFilesNamingThem) {
  DataCheckOptions options;
  options.flag = "--train_data";
  std::string packed = Pack(text_, Compression::kGzip);
  std::string corrupt_block = packed.substr(0, 10) + std::string(200, '\xee') + packed.substr(210);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"header.gz", std::string("\x1f\x8b\x08", 3)},           // truncated header
      {"block.gz", corrupt_block},                             // corrupt first block
      {"frame.zst", std::string("\x28\xb5\x2f\xfd\xff\xff", 6)},  // bad frame header
  };
  for (const auto& [name, bytes] : cases) {
    WriteFile(dir_.File(name), bytes);
    absl::Status st = CheckDataFiles({dir_.File(name)}, Schema(), options);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << name << ": " << st;
    EXPECT_NE(st.message().find("--train_data: " + dir_.File(name) + ": "), std::string::npos)
        << st;
  }
}

}  // namespace
}  // namespace pstrain::worker
