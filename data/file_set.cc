#include "data/file_set.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hash.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// Byte `shard * total / num_shards` without overflow.
uint64_t Cut(uint64_t total, int shard, int num_shards) {
  unsigned __int128 x = static_cast<unsigned __int128>(total) * static_cast<uint64_t>(shard);
  return static_cast<uint64_t>(x / static_cast<uint64_t>(num_shards));
}

// The first bytes of `path` (up to 4).
absl::StatusOr<std::string> ReadHead(const char* path) {
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
  return std::string(head, got);
}

// Adds the regular file `path` of `size` bytes to *out.
absl::Status AddFile(const std::string& path, uint64_t size, std::vector<InputFile>* out) {
  InputFile file{path, size};
  if (file.size > 0) {
    PS_ASSIGN_OR_RETURN(std::string head, ReadHead(path.c_str()));
    file.compression = DetectCompression(head);
    file.parquet = head == "PAR1";
  }
  out->push_back(std::move(file));
  return absl::OkStatus();
}

// Adds every regular file under folder `dir`, recursively, but for names
// starting with '.' or '_'; returns how many.
absl::StatusOr<size_t> AddFolder(const std::string& dir, int depth, std::vector<InputFile>* out) {
  if (depth > 32) return absl::InvalidArgumentError(absl::StrCat(dir, ": folders nested too deep"));
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("read folder ", dir, ": ", ec.message()));
  std::vector<std::string> names;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::PermissionDeniedError(absl::StrCat("read folder ", dir, ": ", ec.message()));
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.' && name[0] != '_') names.push_back(name);
  }
  size_t found = 0;
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, dir.ends_with('/') ? "" : "/", name);
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("stat ", path));
    if (S_ISDIR(st.st_mode)) {
      PS_ASSIGN_OR_RETURN(size_t n, AddFolder(path, depth + 1, out));
      found += n;
    } else if (S_ISREG(st.st_mode)) {
      PS_RETURN_IF_ERROR(AddFile(path, static_cast<uint64_t>(st.st_size), out));
      ++found;
    }
  }
  return found;
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
    if (S_ISDIR(st.st_mode)) {
      absl::StatusOr<size_t> n = AddFolder(g.gl_pathv[i], 0, out);
      if (!n.ok()) {
        status = n.status();
        break;
      }
      found += *n;
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    status = AddFile(g.gl_pathv[i], static_cast<uint64_t>(st.st_size), out);
    if (!status.ok()) break;
    ++found;
  }
  globfree(&g);
  if (!status.ok()) return status;
  if (found == 0) {
    return absl::NotFoundError(absl::StrCat("no regular file matches \"", pattern,
                                            "\" (nor lies in a folder it matches)"));
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

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Hive's escaping of a partition value: %XX is the byte XX; a '%' not
// followed by two hex digits stays as it is.
std::string Unescape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '%' && i + 2 < v.size() && HexDigit(v[i + 1]) >= 0 && HexDigit(v[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(v[i + 1]) * 16 + HexDigit(v[i + 2])));
      i += 2;
    } else {
      out.push_back(v[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PartitionValues(std::string_view path,
                                                         const std::vector<std::string>& keys) {
  std::vector<std::string> values(keys.size());
  std::vector<bool> found(keys.size(), false);
  // The folders of the path (not the file's own name), first to last: the
  // last folder naming a key wins.
  const size_t name_at = path.rfind('/');
  std::string_view folders = name_at == std::string_view::npos ? "" : path.substr(0, name_at);
  while (!folders.empty()) {
    const size_t slash = folders.find('/');
    const std::string_view part = folders.substr(0, slash);
    folders = slash == std::string_view::npos ? "" : folders.substr(slash + 1);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = part.substr(0, eq);
    for (size_t k = 0; k < keys.size(); ++k) {
      if (keys[k] != key) continue;
      const std::string_view v = part.substr(eq + 1);
      values[k] = v == "__HIVE_DEFAULT_PARTITION__" ? std::string() : Unescape(v);
      found[k] = true;
    }
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!found[k]) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(path), ": no folder ", keys[k], "=... in its path, but the schema's partition_columns "
          "name \"", keys[k], "\" (Hive-style folders: .../", keys[k], "=VALUE/file)"));
    }
  }
  return values;
}

std::string DescribeInputs(const std::vector<InputFile>& files, int shard_index, int num_shards) {
  // The files' common folder: the longest shared prefix, cut after its
  // last '/'.
  size_t common = 0;
  if (!files.empty()) {
    const std::string_view first = files[0].path;
    size_t shared = first.size();
    for (const InputFile& f : files) {
      size_t k = 0;
      while (k < shared && k < f.path.size() && f.path[k] == first[k]) ++k;
      shared = k;
    }
    const size_t slash = first.substr(0, shared).rfind('/');
    common = slash == std::string_view::npos ? 0 : slash + 1;
  }
  uint64_t h = Mix64(static_cast<uint64_t>(shard_index) * 0x100000001ULL + num_shards);
  uint64_t bytes = 0;
  size_t count = 0;
  for (const InputFile& f : files) {
    if (f.size == 0) continue;  // no rows: moves none
    ++count;
    h = HashBytes(std::string_view(f.path).substr(std::min(common, f.path.size())), h);
    h = Mix64(h ^ f.size);
    bytes += f.size;
  }
  return absl::StrFormat("%d file%s, %d bytes, shard %d of %d, digest %016x", count,
                         count == 1 ? "" : "s", bytes, shard_index + 1, num_shards, h);
}

}  // namespace pstrain::worker
