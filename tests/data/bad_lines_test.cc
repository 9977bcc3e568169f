// Bad lines through the readers: each is named FILE:LINE (never a byte
// offset), also in a shard that starts mid-file and for one that is not
// logged; the fraction limit is judged over the whole shard, whether the
// bad lines come first or last and however small the file is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/file_set.h"
#include "data/reader.h"
#include "data/shard_scanner.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

std::string Row(int r) { return absl::StrCat(r % 2, "\t", r, "\t\tr", r, "\tt", r % 7, "\n"); }

ReaderOptions Options(const std::string& path) {
  ReaderOptions o;
  o.patterns = {path};
  o.schema.num_dense = 2;
  o.schema.num_sparse = 2;
  o.batch_size = 64;
  o.io_buffer_bytes = 4096;
  return o;
}

// Reads to the end; the error, if any (rows delivered in *rows).
absl::Status Drain(const ReaderOptions& o, int64_t* rows = nullptr) {
  absl::StatusOr<std::unique_ptr<DataReader>> reader = DataReader::Open(o);
  if (!reader.ok()) return reader.status();
  int64_t n = 0;
  while (true) {
    absl::StatusOr<std::shared_ptr<const Batch>> b = (*reader)->Next();
    if (!b.ok()) {
      if (rows != nullptr) *rows = n;
      return b.status();
    }
    if (*b == nullptr) break;
    n += (*b)->size;
  }
  if (rows != nullptr) *rows = n;
  return absl::OkStatus();
}

TEST(BadLines, BadLinesAtTheStartAreJudgedOverTheWholeFile) {
  // 20 bad lines in the first 100 (20 % of them), 0.4 % of the file.
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 5000; ++r) s += r < 100 && r % 5 == 0 ? "garbage\n" : Row(r);
  WriteFile(dir.File("a.tsv"), s);
  int64_t rows = 0;
  EXPECT_TRUE(Drain(Options(dir.File("a.tsv")), &rows).ok());
  EXPECT_EQ(rows, 4980);
}

TEST(BadLines, ASmallFileWithItsBadLinesAtTheEndFailsWithTheCounts) {
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 300; ++r) s += Row(r);
  for (int r = 0; r < 6; ++r) s += "1\tnot a number\t\ta\tb\n";
  WriteFile(dir.File("small.tsv"), s);
  const absl::Status st = Drain(Options(dir.File("small.tsv")));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("too many bad lines: 6 of 306 (1.96%) exceed "
                              "max_bad_lines_fraction 0.01"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find("small.tsv:306: column I1: not an integer: \"not a number\"; "
                              "the line: \"1\\tnot a number\\t\\ta\\tb\""),
            std::string::npos)
      << st;
}

TEST(BadLines, AShardStartingMidFileNamesItsLinesByNumber) {
  // Bad lines at lines 1600, 1700, ... 2500: all in the second of two
  // shards, the last one past the five that are logged.
  ScratchDir dir;
  std::string s;
  for (int line = 1; line <= 3000; ++line) {
    s += line >= 1600 && line <= 2500 && line % 100 == 0 ? absl::StrCat("bad ", line, "\n")
                                                           : Row(line);
  }
  WriteFile(dir.File("b.tsv"), s);
  ReaderOptions o = Options(dir.File("b.tsv"));
  o.num_shards = 2;
  o.shard_index = 1;
  o.max_bad_lines_fraction = 0.001;
  const absl::Status st = Drain(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("b.tsv:2500: "), std::string::npos) << st;
  EXPECT_NE(st.message().find("\"bad 2500\""), std::string::npos) << st;
  EXPECT_EQ(st.message().find("byte"), std::string::npos) << st;
}

TEST(BadLines, AScanFailsBeforeItsEndOnlyWhenTheRestCannotDiluteThem) {
  // 3000 bad lines, then 20000 good ones of about 21 bytes: 1 % of the
  // most lines the rest could hold (about 210000) is passed at about 1900
  // bad lines, long before the good ones.
  ScratchDir dir;
  std::string s;
  for (int r = 0; r < 23000; ++r) s += r < 3000 ? "x\n" : Row(r);
  WriteFile(dir.File("c.tsv"), s);
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir.File("c.tsv")});
  ASSERT_TRUE(files.ok()) << files.status();
  ScannerOptions so;
  so.schema = Options("").schema;
  so.max_logged_bad_lines = 0;
  so.early_judgement_min_lines = 0;  // however small the rest
  auto scanner = *ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
  ParsedRow row;
  absl::StatusOr<bool> more = scanner->NextRow(&row);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(more.status().message().find("lines read so far"), std::string::npos) << more.status();
  EXPECT_GT(scanner->bad_lines(), 1500);
  EXPECT_LT(scanner->bad_lines(), 3000);
  EXPECT_EQ(scanner->good_lines(), 0);
  // 150 bad lines of 20150: 1 % of the rest is never passed, and the end judges.
  s.clear();
  for (int r = 0; r < 20150; ++r) s += r < 150 ? "x\n" : Row(r);
  WriteFile(dir.File("c.tsv"), s);
  files = ExpandFilePatterns({dir.File("c.tsv")});
  scanner = *ShardScanner::Create(*files, ShardRanges(*files, 0, 1), so);
  while (true) {
    more = scanner->NextRow(&row);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
  }
  EXPECT_EQ(scanner->good_lines(), 20000);
}

}  // namespace
}  // namespace pstrain::worker
