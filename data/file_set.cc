#include "data/file_set.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// Byte `shard * total / num_shards` without overflow.
uint64_t Cut(uint64_t total, int shard, int num_shards) {
  unsigned __int128 x = static_cast<unsigned __int128>(total) * static_cast<uint64_t>(shard);
  return static_cast<uint64_t>(x / static_cast<uint64_t>(num_shards));
}

// The compression of `path`, from its first bytes.
absl::StatusOr<Compression> ReadCompression(const char* path) {
  int fd;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  char head[4];
  size_t got = 0;
  while (got < sizeof(head)) {
    ssize_t r = ::pread(fd, head + got, sizeof(head) - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      absl::Status st = ErrnoToStatus(errno, absl::StrCat("read ", path));
      ::close(fd);
      return st;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return DetectCompression(std::string_view(head, got));
}

absl::Status GlobOne(const std::string& pattern, std::vector<InputFile>* out) {
  glob_t g{};
  int rc = glob(pattern.c_str(), GLOB_ERR | GLOB_NOSORT, nullptr, &g);
  if (rc == GLOB_NOSPACE) {
    globfree(&g);
    return absl::ResourceExhaustedError(absl::StrCat("glob(\"", pattern, "\"): out of memory"));
  }
  if (rc == GLOB_ABORTED) {
    globfree(&g);
    return absl::PermissionDeniedError(absl::StrCat("glob(\"", pattern, "\"): read error"));
  }
  size_t found = 0;
  absl::Status status;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
    struct stat st;
    if (stat(g.gl_pathv[i], &st) != 0) {
      status = ErrnoToStatus(errno, absl::StrCat("stat ", g.gl_pathv[i]));
      break;
    }
    if (!S_ISREG(st.st_mode)) continue;
    InputFile file{g.gl_pathv[i], static_cast<uint64_t>(st.st_size)};
    if (file.size > 0) {
      absl::StatusOr<Compression> compression = ReadCompression(g.gl_pathv[i]);
      if (!compression.ok()) {
        status = compression.status();
        break;
      }
      file.compression = *compression;
    }
    out->push_back(std::move(file));
    ++found;
  }
  globfree(&g);
  if (!status.ok()) return status;
  if (found == 0) {
    return absl::NotFoundError(absl::StrCat("no regular file matches \"", pattern, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

const char* CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "plain";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
  }
  return "unknown";
}

Compression DetectCompression(std::string_view head) {
  if (head.starts_with(std::string_view("\x1f\x8b", 2))) return Compression::kGzip;
  if (head.starts_with(std::string_view("\x28\xb5\x2f\xfd", 4))) return Compression::kZstd;
  return Compression::kNone;
}

absl::StatusOr<std::vector<InputFile>> ExpandFilePatterns(
    const std::vector<std::string>& patterns) {
  if (patterns.empty()) return absl::InvalidArgumentError("no input file patterns");
  std::vector<InputFile> files;
  for (const std::string& p : patterns) PS_RETURN_IF_ERROR(GlobOne(p, &files));
  std::sort(files.begin(), files.end(),
            [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  files.erase(std::unique(files.begin(), files.end(),
                          [](const InputFile& a, const InputFile& b) { return a.path == b.path; }),
              files.end());
  return files;
}

std::vector<FileRange> ShardRanges(const std::vector<InputFile>& files, int shard_index,
                                   int num_shards) {
  uint64_t total = 0;
  for (const InputFile& f : files) total += f.size;
  const uint64_t lo = Cut(total, shard_index, num_shards);
  const uint64_t hi = Cut(total, shard_index + 1, num_shards);
  std::vector<FileRange> ranges;
  uint64_t file_begin = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t size = files[i].size;
    const uint64_t file_end = file_begin + size;
    if (files[i].compression != Compression::kNone) {
      // A unit: whole, to the shard that owns its first byte.
      if (size > 0 && lo <= file_begin && file_begin < hi) {
        ranges.push_back(FileRange{static_cast<int>(i), 0, size});
      }
    } else {
      const uint64_t b = std::max(lo, file_begin);
      const uint64_t e = std::min(hi, file_end);
      if (b < e) ranges.push_back(FileRange{static_cast<int>(i), b - file_begin, e - file_begin});
    }
    file_begin = file_end;
  }
  return ranges;
}

}  // namespace pstrain::worker
