#include "common/checkpoint/checked_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status.h"

namespace pstrain {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kTrailerBytes = 8;

// The checks every checked file passes, on its checksum of the bytes before
// any trailer (`sum`), its stored trailer and its first 8 bytes.
absl::Status Verify(const FileKind& kind, const std::string& path, ChecksumAt where,
                    const Checksum64& sum, uint64_t trailer, absl::string_view manifest_checksum,
                    const char* magic) {
  const bool matches = where == ChecksumAt::kTrailer ? sum.Digest() == trailer
                                                     : sum.Hex() == manifest_checksum;
  if (!matches) return CorruptFileError(kind, path, "checksum mismatch (corrupt or truncated)");
  if (std::memcmp(magic, kind.magic, kMagicBytes) != 0) {
    return CorruptFileError(kind, path, absl::StrCat("not a pstrain ", kind.what));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CorruptFileError(const FileKind& kind, const std::string& path,
                              absl::string_view why) {
  return absl::DataLossError(absl::StrCat(kind.what, " ", path, ": ", why));
}

absl::StatusOr<std::string> ReadCheckedFile(const std::string& path, const FileKind& kind,
                                            ChecksumAt where, absl::string_view manifest_checksum) {
  PS_ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
  const size_t trailer = where == ChecksumAt::kTrailer ? kTrailerBytes : 0;
  if (data.size() < kMagicBytes + trailer) {
    return CorruptFileError(kind, path, "truncated (shorter than its header)");
  }
  const size_t end = data.size() - trailer;
  Checksum64 sum;
  sum.Update(data.data(), end);
  uint64_t stored = 0;
  if (trailer > 0) std::memcpy(&stored, data.data() + end, sizeof(stored));
  PS_RETURN_IF_ERROR(Verify(kind, path, where, sum, stored, manifest_checksum, data.data()));
  data.resize(end);
  data.erase(0, kMagicBytes);
  return data;
}

absl::StatusOr<std::unique_ptr<CheckedFileWriter>> CheckedFileWriter::Open(
    const std::string& path, const FileKind& kind) {
  PS_ASSIGN_OR_RETURN(auto w, AtomicFileWriter::Open(path));
  PS_RETURN_IF_ERROR(w->Append(kind.magic, kMagicBytes));
  return std::unique_ptr<CheckedFileWriter>(new CheckedFileWriter(std::move(w)));
}

absl::Status CheckedFileWriter::Append(const void* data, size_t n) {
  return writer_->Append(data, n);
}

absl::StatusOr<std::string> CheckedFileWriter::Commit(ChecksumAt where) {
  const uint64_t sum = writer_->checksum().Digest();
  if (where == ChecksumAt::kTrailer) PS_RETURN_IF_ERROR(writer_->Append(&sum, sizeof(sum)));
  PS_RETURN_IF_ERROR(writer_->Commit());
  return absl::StrFormat("%016x", sum);
}

CheckedFile::~CheckedFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status CheckedFile::Corrupt(absl::string_view why) const {
  return CorruptFileError(kind_, path_, why);
}

absl::Status CheckedFile::ReadFileAt(uint64_t at, void* dst, size_t n) const {
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = pread(fd_, out, n, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoToStatus(errno, absl::StrCat("read ", kind_.what, " ", path_));
    if (got == 0) return Corrupt("the file became shorter while it was read");
    out += got;
    at += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status CheckedFile::ReadAt(uint64_t at, void* dst, size_t n) const {
  if (at > size() || n > size() - at) {
    return Corrupt(absl::StrCat("a read of ", n, " bytes at ", at, " runs past the end"));
  }
  return ReadFileAt(begin_ + at, dst, n);
}

absl::StatusOr<std::unique_ptr<CheckedFile>> CheckedFile::Open(const std::string& path,
                                                               const FileKind& kind,
                                                               ChecksumAt where,
                                                               absl::string_view manifest_checksum) {
  std::unique_ptr<CheckedFile> f(new CheckedFile());
  f->path_ = path;
  f->kind_ = kind;
  f->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat info;
  if (fstat(f->fd_, &info) != 0) return ErrnoToStatus(errno, absl::StrCat("stat ", path));
  f->file_bytes_ = static_cast<uint64_t>(std::max<off_t>(info.st_size, 0));
  const uint64_t trailer = where == ChecksumAt::kTrailer ? kTrailerBytes : 0;
  if (f->file_bytes_ < kMagicBytes + trailer) {
    return f->Corrupt("truncated (shorter than its header)");
  }
  f->begin_ = kMagicBytes;
  f->end_ = f->file_bytes_ - trailer;
  // The checksum first, in one sequential pass of large reads.
  posix_fadvise(f->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  Checksum64 sum;
  std::vector<char> chunk(std::min<uint64_t>(f->end_, 4 << 20));
  for (uint64_t at = 0; at < f->end_; at += chunk.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), f->end_ - at));
    PS_RETURN_IF_ERROR(f->ReadFileAt(at, chunk.data(), n));
    sum.Update(chunk.data(), n);
  }
  f->checksum_ = sum.Hex();
  uint64_t stored = 0;
  if (where == ChecksumAt::kTrailer) {
    PS_RETURN_IF_ERROR(f->ReadFileAt(f->end_, &stored, sizeof(stored)));
  }
  char magic[kMagicBytes];
  PS_RETURN_IF_ERROR(f->ReadFileAt(0, magic, kMagicBytes));
  PS_RETURN_IF_ERROR(Verify(kind, path, where, sum, stored, manifest_checksum, magic));
  return f;
}

}  // namespace pstrain
