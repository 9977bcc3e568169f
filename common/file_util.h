// Small file helpers that report errors as Status with the path in the
// message.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/checksum.h"

namespace pstrain {

// Writes `contents` to `path` so that readers see the old file or the whole
// new one, never a part: temp file in the same folder, fsync, rename, fsync
// of the folder.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

// Puts folder `from` (complete) where folder `to` is, in one step: readers
// of `to` see the old folder or the new one, never a mix. A `to` that holds
// files is swapped with `from` (renameat2 RENAME_EXCHANGE) and the old
// contents, then at `from`, are removed. Errors name both paths; Unimplemented
// when the file system cannot exchange folders (`from` is left as it was).
absl::Status ReplaceDirectory(const std::string& from, const std::string& to);

// Writes a file so that it appears whole or not at all: appends go to
// PATH.tmp.<pid>, Commit() fsyncs and renames it to PATH (and fsyncs the
// folder). A writer destroyed without Commit() removes its temp file. Keeps a
// Checksum64 of everything appended. Not thread-safe.
class AtomicFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();
  absl::Status Append(const void* data, size_t n);
  absl::Status Commit();
  const Checksum64& checksum() const { return checksum_; }
  uint64_t bytes() const { return bytes_; }

 private:
  AtomicFileWriter(std::string path, std::string tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  std::string path_, tmp_;
  int fd_;
  bool committed_ = false;
  Checksum64 checksum_;
  uint64_t bytes_ = 0;
};

}  // namespace pstrain
