#include "worker/data/file_set.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// Byte `shard * total / num_shards` without overflow.
uint64_t Cut(uint64_t total, int shard, int num_shards) {
  unsigned __int128 x = static_cast<unsigned __int128>(total) * static_cast<uint64_t>(shard);
  return static_cast<uint64_t>(x / static_cast<uint64_t>(num_shards));
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
    out->push_back(InputFile{g.gl_pathv[i], static_cast<uint64_t>(st.st_size)});
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
    const uint64_t file_end = file_begin + files[i].size;
    const uint64_t b = std::max(lo, file_begin);
    const uint64_t e = std::min(hi, file_end);
    if (b < e) ranges.push_back(FileRange{static_cast<int>(i), b - file_begin, e - file_begin});
    file_begin = file_end;
  }
  return ranges;
}

}  // namespace pstrain::worker
