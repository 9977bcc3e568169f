// Byte-range sharding: N shards over the same files see every line exactly
// once, whatever the file sizes, line lengths, buffer sizes and compression
// (a compressed file is read whole by the shard owning its first byte).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "data/compress_file.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "tests/data/test_files.h"

namespace pstrain::worker {
namespace {

using testing_util::ScratchDir;
using testing_util::WriteFile;

struct ExpectedLine {
  int file;
  uint64_t offset;
  std::string text;
  bool operator<(const ExpectedLine& o) const {
    return std::tie(file, offset, text) < std::tie(o.file, o.offset, o.text);
  }
  bool operator==(const ExpectedLine& o) const {
    return file == o.file && offset == o.offset && text == o.text;
  }
};

// The reference split: a line starts at 0 and after every '\n' that is not
// the file's last byte.
std::vector<ExpectedLine> SplitLines(int file, const std::string& content) {
  std::vector<ExpectedLine> out;
  size_t start = 0;
  while (start < content.size()) {
    size_t nl = content.find('\n', start);
    size_t end = nl == std::string::npos ? content.size() : nl;
    out.push_back({file, start, content.substr(start, end - start)});
    start = end + 1;
  }
  return out;
}

std::vector<ExpectedLine> ReadShard(const std::vector<InputFile>& files, int shard, int n,
                                    size_t buffer_bytes, size_t max_line) {
  std::vector<ExpectedLine> got;
  LineReader reader(buffer_bytes, max_line);
  for (const FileRange& r : ShardRanges(files, shard, n)) {
    EXPECT_TRUE(reader.Open(files[r.file], r.begin, r.end).ok());
    LineReader::Line line;
    while (true) {
      absl::StatusOr<bool> more = reader.Next(&line);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      EXPECT_FALSE(line.overlong);
      got.push_back({r.file, line.offset, std::string(line.text)});
    }
  }
  return got;
}

class ShardingTest : public ::testing::Test {
 protected:
  // Writes files with awkward shapes and returns them with their lines;
  // with `compressed`, every file but each third is gzip or zstd (files
  // found by ExpandFilePatterns, which tells them by content).
  void MakeFiles(uint32_t seed, bool compressed = false) {
    std::mt19937 rng(seed);
    std::vector<std::string> contents;
    contents.push_back("");                               // empty file
    contents.push_back("single line without newline");    // no final newline
    contents.push_back("\n\n\nx\n");                      // empty lines
    contents.push_back(std::string(700, 'L') + "\nshort\n");  // one line spans shards
    for (int k = 0; k < 3; ++k) {
      std::string c;
      int lines = 1 + rng() % 60;
      for (int i = 0; i < lines; ++i) {
        c += "f" + std::to_string(k) + "l" + std::to_string(i) + ":" +
             std::string(rng() % 90, static_cast<char>('a' + rng() % 26));
        if (i + 1 < lines || k != 1) c += '\n';  // file 1 of these ends without '\n'
      }
      contents.push_back(c);
    }
    for (size_t i = 0; i < contents.size(); ++i) {
      std::string path = dir_.File("part-" + std::to_string(i));
      const Compression c = !compressed || i % 3 == 0 ? Compression::kNone
                            : i % 3 == 1             ? Compression::kGzip
                                                     : Compression::kZstd;
      if (c == Compression::kNone) {
        WriteFile(path, contents[i]);
      } else {
        absl::StatusOr<std::string> packed = CompressBytes(contents[i], c, 3);
        ASSERT_TRUE(packed.ok()) << packed.status();
        WriteFile(path, *packed);
      }
      for (const ExpectedLine& l : SplitLines(static_cast<int>(i), contents[i])) {
        expected_.push_back(l);
      }
    }
    absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir_.File("part-*")});
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *files;
    for (size_t i = 0; i < files_.size(); ++i) {
      EXPECT_EQ(files_[i].compression != Compression::kNone, compressed && i % 3 != 0) << i;
    }
  }

  ScratchDir dir_;
  std::vector<InputFile> files_;
  std::vector<ExpectedLine> expected_;
};

// Reads n shards and checks that together they saw every line once.
void ExpectEveryLineOnce(const std::vector<InputFile>& files,
                         const std::vector<ExpectedLine>& expected, int n, size_t buffer) {
  std::vector<ExpectedLine> all;
  for (int shard = 0; shard < n; ++shard) {
    std::vector<ExpectedLine> part = ReadShard(files, shard, n, buffer, 1024);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::vector<ExpectedLine> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "a line was read twice; n=" << n;
  std::vector<ExpectedLine> want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sorted, want) << "n=" << n << " buffer=" << buffer;
  // Shards come in file order, so concatenating them is the file order.
  EXPECT_EQ(all, expected) << "n=" << n << " buffer=" << buffer;
}

TEST_F(ShardingTest, ShardsTogetherSeeEveryLineExactlyOnce) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    files_.clear();
    expected_.clear();
    MakeFiles(seed);
    for (int n = 1; n <= 5; ++n) {
      for (size_t buffer : {size_t{1}, size_t{97}, size_t{1} << 20}) {
        ExpectEveryLineOnce(files_, expected_, n, buffer);
      }
    }
  }
}

TEST_F(ShardingTest, MixOfPlainAndCompressedFilesIsSeenExactlyOnceByNShards) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    files_.clear();
    expected_.clear();
    MakeFiles(seed, /*compressed=*/true);
    for (int n = 1; n <= 5; ++n) {
      for (size_t buffer : {size_t{1}, size_t{97}, size_t{1} << 20}) {
        ExpectEveryLineOnce(files_, expected_, n, buffer);
      }
    }
  }
}

TEST_F(ShardingTest, CompressedFileIsReadWholeByTheShardOwningItsFirstByte) {
  MakeFiles(4, /*compressed=*/true);
  uint64_t total = 0;
  for (const InputFile& f : files_) total += f.size;
  for (int n = 1; n <= 5; ++n) {
    uint64_t file_begin = 0;
    for (size_t i = 0; i < files_.size(); ++i) {
      const InputFile& f = files_[i];
      if (f.compression != Compression::kNone) {
        // Shard s owns bytes [s*T/n, (s+1)*T/n), rounded down.
        int owner = 0;
        while ((owner + 1) * total / n <= file_begin) ++owner;
        for (int shard = 0; shard < n; ++shard) {
          int ranges = 0;
          for (const FileRange& r : ShardRanges(files_, shard, n)) {
            if (r.file != static_cast<int>(i)) continue;
            ++ranges;
            EXPECT_EQ(r.begin, 0u);
            EXPECT_EQ(r.end, f.size);
          }
          EXPECT_EQ(ranges, shard == owner ? 1 : 0) << "file " << i << " shard " << shard;
        }
      }
      file_begin += f.size;
    }
  }
}

TEST_F(ShardingTest, RangesCoverTheByteStreamWithoutOverlap) {
  MakeFiles(5, /*compressed=*/true);
  uint64_t total = 0;
  for (const InputFile& f : files_) total += f.size;
  for (int n = 1; n <= 7; ++n) {
    uint64_t covered = 0;
    for (int shard = 0; shard < n; ++shard) {
      for (const FileRange& r : ShardRanges(files_, shard, n)) {
        EXPECT_LT(r.begin, r.end);
        EXPECT_LE(r.end, files_[r.file].size);
        covered += r.end - r.begin;
      }
    }
    EXPECT_EQ(covered, total);
  }
}

TEST_F(ShardingTest, MoreShardsThanBytesLeavesSomeShardsEmpty) {
  WriteFile(dir_.File("tiny"), "a\nb\n");
  std::vector<InputFile> files = {{dir_.File("tiny"), 4}};
  std::vector<ExpectedLine> all;
  for (int shard = 0; shard < 9; ++shard) {
    std::vector<ExpectedLine> part = ReadShard(files, shard, 9, 4096, 64);
    all.insert(all.end(), part.begin(), part.end());
  }
  EXPECT_EQ(all, SplitLines(0, "a\nb\n"));
}

TEST(LineReader, OverlongLinesAreFlaggedAndSkippedWithoutBufferingThem) {
  ScratchDir dir;
  std::string content = "ok1\n" + std::string(5000, 'x') + "\nok2\n" + std::string(300, 'y');
  WriteFile(dir.File("f"), content);
  LineReader reader(16, 100);
  ASSERT_TRUE(reader.Open(dir.File("f"), content.size(), 0, content.size()).ok());
  LineReader::Line line;
  std::vector<std::pair<std::string, bool>> got;
  while (*reader.Next(&line)) got.push_back({std::string(line.text), line.overlong});
  std::vector<std::pair<std::string, bool>> want = {
      {"ok1", false}, {"", true}, {"ok2", false}, {"", true}};
  EXPECT_EQ(got, want);
}

TEST(LineReader, LineNumbersCountFromTheStartOfTheFile) {
  ScratchDir dir;
  std::string content;
  for (int i = 1; i <= 100; ++i) content += "line" + std::to_string(i) + "\n";
  WriteFile(dir.File("f"), content);
  LineReader reader(64, 32);
  const uint64_t mid = content.size() / 2;
  ASSERT_TRUE(reader.Open(dir.File("f"), content.size(), mid, content.size()).ok());
  LineReader::Line line;
  while (*reader.Next(&line)) {
    int64_t want = std::stoll(std::string(line.text.substr(4)));
    EXPECT_EQ(*reader.LineNumber(line), want);
  }
}

TEST(LineReader, MissingFileIsNotFound) {
  LineReader reader(4096, 64);
  EXPECT_EQ(reader.Open("/nonexistent/pstrain/file", 10, 0, 10).code(),
            absl::StatusCode::kNotFound);
}

TEST(ExpandFilePatterns, GlobsAreSortedDeduplicatedAndSkipDirectories) {
  ScratchDir dir;
  WriteFile(dir.File("b.tsv"), "1\n");
  WriteFile(dir.File("a.tsv"), "12\n");
  WriteFile(dir.File("c.txt"), "");
  std::filesystem::create_directories(dir.File("d.tsv"));
  absl::StatusOr<std::vector<InputFile>> files =
      ExpandFilePatterns({dir.File("*.tsv"), dir.File("a.tsv"), dir.File("c.txt")});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, dir.File("a.tsv"));
  EXPECT_EQ((*files)[0].size, 3u);
  EXPECT_EQ((*files)[1].path, dir.File("b.tsv"));
  EXPECT_EQ((*files)[2].path, dir.File("c.txt"));
}

TEST(ExpandFilePatterns, PatternWithoutMatchIsNotFound) {
  ScratchDir dir;
  WriteFile(dir.File("a.tsv"), "1\n");
  absl::StatusOr<std::vector<InputFile>> files =
      ExpandFilePatterns({dir.File("a.tsv"), dir.File("*.csv")});
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(files.status().message().find("*.csv"), std::string::npos);
  EXPECT_EQ(ExpandFilePatterns({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// What a resume compares with its checkpoint's: the same rows in the same
// order describe the same, wherever the folder is; anything that moves a
// shard's rows does not.
TEST(DescribeInputs, SameFilesElsewhereMatchAndAnyChangeToTheShardsRowsDoesNot) {
  ScratchDir dir;
  for (const char* sub : {"a/dt=1", "a/dt=2", "b/dt=1", "b/dt=2", "c/dt=1", "c/dt=2"}) {
    std::filesystem::create_directories(dir.File(sub));
  }
  for (const char* root : {"a", "b", "c"}) {
    WriteFile(dir.File(std::string(root) + "/dt=1/part-0.tsv"), "1\t2\n3\t4\n");
    WriteFile(dir.File(std::string(root) + "/dt=2/part-0.tsv"), "5\t6\n");
  }
  WriteFile(dir.File("c/dt=2/part-0.tsv"), "5\t6\n7\t8\n");  // grown
  auto describe = [&](const std::string& root, int shard, int shards) {
    absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns({dir.File(root)});
    EXPECT_TRUE(files.ok()) << files.status();
    return files.ok() ? DescribeInputs(*files, shard, shards) : std::string();
  };
  const std::string a = describe("a", 1, 2);
  EXPECT_EQ(a.substr(0, 40), "2 files, 12 bytes, shard 2 of 2, digest ") << a;
  EXPECT_EQ(describe("b", 1, 2), a) << "the same files in another folder";
  EXPECT_NE(describe("c", 1, 2), a) << "a file grown";
  EXPECT_NE(describe("a", 0, 2), a) << "another shard";
  EXPECT_NE(describe("a", 1, 3), a) << "as many shards more";
  std::filesystem::rename(dir.File("b/dt=2"), dir.File("b/dt=3"));
  EXPECT_NE(describe("b", 1, 2), a) << "a partition renamed";
  WriteFile(dir.File("a/dt=2/part-1.tsv"), "");
  EXPECT_EQ(describe("a", 1, 2), a) << "an empty file added: no rows move";
  WriteFile(dir.File("a/dt=2/part-1.tsv"), "9\t9\n");
  EXPECT_NE(describe("a", 1, 2), a) << "a file of rows added";
}

}  // namespace
}  // namespace pstrain::worker
