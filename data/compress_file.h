// Writers of gzip and zstd files: what the readers decode (decompressor.h),
// made in-process for tests, benchmarks and data generation. Thread-safe
// (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/file_set.h"

namespace pstrain::worker {

// `data` as one gzip member or one zstd frame at `level` (zlib: -1 for its
// default, 0..9; zstd: 1..19). REQUIRES: compression != kNone.
// InvalidArgument for a bad level.
absl::StatusOr<std::string> CompressBytes(std::string_view data, Compression compression,
                                          int level);

// Streams the file `src` into `dst` (one gzip member or zstd frame; through
// a temporary file renamed into place), with bounded memory. Errors as
// CompressBytes, plus I/O naming the file.
absl::Status CompressFile(const std::string& src, const std::string& dst, Compression compression,
                          int level);

}  // namespace pstrain::worker
