// The one writer and verifier of the files checkpoints and exports are made
// of: a checkpoint shard (shard_file.h), an export's table file and
// removed-ids file (serve/model_io.h). Such a file starts with an 8-byte
// magic naming its kind, and every byte of it is covered by a Checksum64,
// kept either in an 8-byte trailer (a checkpoint shard verifies itself) or
// by the caller (an export's manifest lists each file's checksum).
//
// CheckedFileWriter writes through AtomicFileWriter (temp file, fsync,
// rename): a file appears whole or not at all. CheckedFile verifies the
// checksum in one streaming pass, then the magic, before anything reads
// the contents; every error is a DataLoss naming the kind of file and its
// path, and reads past the end are refused, so a corrupt or truncated file
// never becomes a crash or a wrong value. The disk tier's slot file
// (server/ps/tables/slot_store.h) is a store rewritten in place, not a
// sealed file, and keeps its own header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"

namespace pstrain {

struct FileKind {
  const char* magic;  // exactly 8 bytes, e.g. "PSTRCKP1"
  const char* what;   // names such a file in errors, e.g. "checkpoint shard"
};

// Where a file's checksum is kept.
enum class ChecksumAt : uint8_t {
  kTrailer,   // the file's last 8 bytes, over everything before them
  kManifest,  // with the caller (who passes it to CheckedFile::Open)
};

class CheckedFileWriter {
 public:
  // Starts `path` with kind.magic.
  static absl::StatusOr<std::unique_ptr<CheckedFileWriter>> Open(const std::string& path,
                                                                 const FileKind& kind);
  absl::Status Append(const void* data, size_t n);
  // Writes the trailer (kTrailer) and commits. Returns the checksum (16 hex
  // digits) of the file's bytes before the trailer.
  absl::StatusOr<std::string> Commit(ChecksumAt where);
  // Bytes written so far, the magic included.
  uint64_t bytes() const { return writer_->bytes(); }

 private:
  explicit CheckedFileWriter(std::unique_ptr<AtomicFileWriter> w) : writer_(std::move(w)) {}
  std::unique_ptr<AtomicFileWriter> writer_;
};

// DataLoss "<kind.what> <path>: <why>": the error of every check of such a
// file, the callers' own checks of its contents included.
absl::Status CorruptFileError(const FileKind& kind, const std::string& path,
                              absl::string_view why);

// The contents of a checked file read whole in one pass (for files a
// reader keeps in memory anyway: an export's tables), verified as
// CheckedFile::Open verifies them.
absl::StatusOr<std::string> ReadCheckedFile(const std::string& path, const FileKind& kind,
                                            ChecksumAt where,
                                            absl::string_view manifest_checksum = {});

// A verified file, open for reads of its contents: the bytes after the
// magic and before any trailer.
class CheckedFile {
 public:
  // Verifies `path`: its checksum (the trailer's, or `manifest_checksum`)
  // and its magic. DataLoss naming kind.what and the path when it is not
  // such a file, is truncated or corrupt.
  static absl::StatusOr<std::unique_ptr<CheckedFile>> Open(
      const std::string& path, const FileKind& kind, ChecksumAt where,
      absl::string_view manifest_checksum = {});
  ~CheckedFile();
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;

  // Size of the contents.
  uint64_t size() const { return end_ - begin_; }
  // The whole file's size on disk.
  uint64_t file_bytes() const { return file_bytes_; }
  // The verified checksum, 16 hex digits.
  const std::string& checksum() const { return checksum_; }
  // Reads contents [at, at + n). DataLoss past the end or when the file got
  // shorter since Open.
  absl::Status ReadAt(uint64_t at, void* dst, size_t n) const;
  // DataLoss "<what> <path>: <why>": for the callers' own checks of the
  // contents.
  absl::Status Corrupt(absl::string_view why) const;

 private:
  CheckedFile() = default;
  absl::Status ReadFileAt(uint64_t at, void* dst, size_t n) const;

  std::string path_;
  FileKind kind_{"", ""};
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  uint64_t begin_ = 0;  // contents: [begin_, end_) of the file
  uint64_t end_ = 0;
  std::string checksum_;
};

}  // namespace pstrain
