#include "common/checkpoint/checked_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"

namespace pstrain {
namespace {

constexpr FileKind kKind{"PSTRTEST", "test file"};
constexpr FileKind kOther{"PSTROTHR", "other file"};

std::string TempPath(const char* name) {
  char tmpl[] = "/tmp/checked_file_test.XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return std::string(tmpl) + "/" + name;
}

std::string Write(const std::string& path, ChecksumAt where, const std::string& contents) {
  auto w = CheckedFileWriter::Open(path, kKind);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->Append(contents.data(), contents.size()).ok());
  EXPECT_EQ((*w)->bytes(), 8 + contents.size());
  auto sum = (*w)->Commit(where);
  EXPECT_TRUE(sum.ok()) << sum.status();
  return *sum;
}

std::string ReadRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CheckedFile, ATrailerFileReadsBackItsContentsAndChecksum) {
  const std::string path = TempPath("t.bin");
  const std::string sum = Write(path, ChecksumAt::kTrailer, "hello, shards");
  EXPECT_EQ(sum.size(), 16u);
  const std::string raw = ReadRaw(path);
  ASSERT_EQ(raw.size(), 8 + 13 + 8u);
  EXPECT_EQ(raw.substr(0, 8), "PSTRTEST");
  auto f = CheckedFile::Open(path, kKind, ChecksumAt::kTrailer);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), 13u);
  EXPECT_EQ((*f)->file_bytes(), raw.size());
  EXPECT_EQ((*f)->checksum(), sum);
  EXPECT_EQ(*ReadCheckedFile(path, kKind, ChecksumAt::kTrailer), "hello, shards");
  char buf[6];
  ASSERT_TRUE((*f)->ReadAt(7, buf, 6).ok());
  EXPECT_EQ(std::string(buf, 6), "shards");
  // Past the end: refused, not read.
  EXPECT_EQ((*f)->ReadAt(8, buf, 6).code(), absl::StatusCode::kDataLoss);
}

TEST(CheckedFile, AManifestFileIsCheckedAgainstTheChecksumGiven) {
  const std::string path = TempPath("m.bin");
  const std::string sum = Write(path, ChecksumAt::kManifest, "table bytes");
  EXPECT_EQ(ReadRaw(path).size(), 8 + 11u);  // no trailer
  auto f = CheckedFile::Open(path, kKind, ChecksumAt::kManifest, sum);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*ReadCheckedFile(path, kKind, ChecksumAt::kManifest, sum), "table bytes");
  auto wrong = CheckedFile::Open(path, kKind, ChecksumAt::kManifest, "0000000000000000");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), "test file " + path + ": checksum"))
      << wrong.status();
}

TEST(CheckedFile, CorruptTruncatedAndForeignFilesAreDataLossNamingThem) {
  const std::string path = TempPath("c.bin");
  Write(path, ChecksumAt::kTrailer, std::string(1000, 'x'));
  const std::string good = ReadRaw(path);
  std::string flipped = good;
  flipped[500] ^= 1;
  WriteRaw(path, flipped);
  // The streaming reader and the whole-file one refuse alike.
  const auto both = [&](const FileKind& kind) {
    absl::Status opened = CheckedFile::Open(path, kind, ChecksumAt::kTrailer).status();
    absl::Status read = ReadCheckedFile(path, kind, ChecksumAt::kTrailer).status();
    EXPECT_EQ(opened, read);
    return opened;
  };
  absl::Status st = both(kKind);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(st.message(), "checksum mismatch")) << st;
  for (size_t keep : {size_t{0}, size_t{5}, size_t{15}, good.size() - 1}) {
    WriteRaw(path, good.substr(0, keep));
    st = both(kKind);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_TRUE(absl::StrContains(st.message(), path)) << st;
  }
  // The right checksum over another kind's magic.
  WriteRaw(path, good);
  st = both(kOther);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(st.message(), "not a pstrain other file")) << st;
  EXPECT_EQ(CheckedFile::Open(path + ".missing", kKind, ChecksumAt::kTrailer).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CheckedFile, AWriterDroppedBeforeCommitLeavesNoFile) {
  const std::string path = TempPath("d.bin");
  {
    auto w = CheckedFileWriter::Open(path, kKind);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("abc", 3).ok());
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace pstrain
