// Input file sets and sharding.
//
// The files matched by a list of patterns are treated as one byte stream
// (their concatenation, in sorted path order; T = total bytes, a compressed
// file counted by its compressed size). Shard i of N owns the bytes
// [i*T/N, (i+1)*T/N) of that stream, and with them:
//  - in a plain file, the lines whose first byte it owns;
//  - a compressed file (gzip or zstd, told by its first bytes) whole, when
//    it owns the file's first byte: such a file cannot be split by byte
//    range, so it is one unit, read by exactly one shard.
// So N shards read disjoint parts of the same files, need no pre-splitting
// and together see every line exactly once. A line never spans two files:
// each file's last line ends at its end, newline or not. Compressed data
// balances only as well as its files do: give at least as many compressed
// files as shards (better several per shard), of similar sizes.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::worker {

// How a file's bytes encode its text.
enum class Compression {
  kNone,  // plain text
  kGzip,  // gzip (RFC 1952), one or more members; starts 1f 8b
  kZstd,  // Zstandard, one or more frames; starts 28 b5 2f fd
};

// "plain", "gzip" or "zstd".
const char* CompressionName(Compression compression);

// The compression of a file whose first bytes are `head` (at least 4 of
// them unless the file is shorter).
Compression DetectCompression(std::string_view head);

struct InputFile {
  std::string path;
  uint64_t size = 0;  // bytes, as stat(2) saw them when the set was expanded
  Compression compression = Compression::kNone;  // from the first bytes, then
  // A Parquet file (its first bytes are "PAR1"): split by row group, not by
  // line. A row group belongs to the shard that owns its first byte.
  bool parquet = false;
};

// Expands each pattern with glob(3), stats the regular files found and
// reads their first bytes for their compression or Parquet magic (by
// content, whatever their names); a folder matched stands for every regular
// file under it, recursively, but for those whose names start with '.' or
// '_' (a warehouse's _SUCCESS and .crc files); the result is sorted by path
// without duplicates (so Hive-style folders, dt=2026-12-01/hour=13/, read in
// their partitions' order). NotFound when a pattern matches no regular file;
// InvalidArgument when there are no patterns; the open(2)/read(2) error of a
// file that cannot be read.
absl::StatusOr<std::vector<InputFile>> ExpandFilePatterns(
    const std::vector<std::string>& patterns);

// A range of line starts in one file: the lines whose first byte lies at a
// file offset in [begin, end). For a compressed file the range is always
// the whole file, [0, size): all its lines.
struct FileRange {
  int file = 0;  // index into the InputFile list
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The non-empty file ranges of shard `shard_index` of `num_shards`, in file
// order (the rule above). Over all shards the ranges cover every byte of
// every file exactly once. REQUIRES: 0 <= shard_index < num_shards.
std::vector<FileRange> ShardRanges(const std::vector<InputFile>& files, int shard_index,
                                   int num_shards);

// The values of Hive-style partition keys `keys` for the file at `path`:
// key k's is the VALUE of the last folder of the path named KEY=VALUE, its
// %XX escapes decoded (as Hive and Spark write them), and empty (a missing
// value) for Hive's __HIVE_DEFAULT_PARTITION__ (a null key). InvalidArgument
// naming the file and key when no folder of the path names the key.
absl::StatusOr<std::vector<std::string>> PartitionValues(std::string_view path,
                                                         const std::vector<std::string>& keys);

// What shard `shard_index` of `num_shards` of `files` reads, in one line
// that two runs compare to see whether they read the same rows:
// "3 files, 12345678 bytes, shard 2 of 4, digest 0123456789abcdef", the
// digest over every non-empty file's path (relative to the files' common
// folder, so data moved elsewhere whole still matches), its size, and the
// shard. Empty files hold no rows and are left out.
std::string DescribeInputs(const std::vector<InputFile>& files, int shard_index, int num_shards);

}  // namespace pstrain::worker
