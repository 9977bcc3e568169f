// Input file sets and byte-range sharding.
//
// The files matched by a list of patterns are treated as one byte stream
// (their concatenation, in sorted path order). Shard i of N owns the lines
// whose first byte lies in [i*T/N, (i+1)*T/N) of that stream (T = total
// bytes), so N shards read disjoint parts of the same files, need no
// pre-splitting and together see every line exactly once. A line never spans
// two files: each file's last line ends at its end, newline or not.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::worker {

struct InputFile {
  std::string path;
  uint64_t size = 0;  // bytes, as stat(2) saw them when the set was expanded
};

// Expands each pattern with glob(3) and stats the regular files found;
// the result is sorted by path without duplicates. NotFound when a pattern
// matches no regular file; InvalidArgument when there are no patterns.
absl::StatusOr<std::vector<InputFile>> ExpandFilePatterns(
    const std::vector<std::string>& patterns);

// A range of line starts in one file: the lines whose first byte lies at a
// file offset in [begin, end).
struct FileRange {
  int file = 0;  // index into the InputFile list
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The non-empty file ranges of shard `shard_index` of `num_shards`, in file
// order. REQUIRES: 0 <= shard_index < num_shards.
std::vector<FileRange> ShardRanges(const std::vector<InputFile>& files, int shard_index,
                                   int num_shards);

}  // namespace pstrain::worker
