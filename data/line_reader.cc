#include "data/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// pread that retries EINTR and short reads until `n` bytes or end of file.
absl::StatusOr<size_t> PreadFull(int fd, char* dst, size_t n, uint64_t offset,
                                 const std::string& path) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, dst + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("read ", path, " at offset ", offset + got));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

LineReader::LineReader(size_t buffer_bytes, size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes),
      buffer_bytes_(std::max(buffer_bytes, 2 * max_line_bytes + 2)) {}

LineReader::~LineReader() { Close(); }

void LineReader::Close() {
  decompressor_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  done_ = true;
}

absl::Status LineReader::Open(const std::string& path, uint64_t file_size, uint64_t begin,
                              uint64_t end) {
  return Open(InputFile{path, file_size, Compression::kNone}, begin, end);
}

absl::Status LineReader::Open(const InputFile& file, uint64_t begin, uint64_t end) {
  Close();
  if (file.parquet) {
    return absl::FailedPreconditionError(absl::StrCat(
        file.path, " is a Parquet file, and this reads text lines only (training, evaluation "
                   "and `pstrain predict` read Parquet)"));
  }
  path_ = file.path;
  if (buf_.empty()) buf_.resize(buffer_bytes_);
  int fd;
  do {
    fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path_));
  fd_ = fd;
  file_size_ = file.size;
  head_ = tail_ = scanned_ = 0;
  next_index_ = 0;
  lines_before_range_ = -1;
  if (file.compression != Compression::kNone) {
    // A unit: all its text when the range holds its first byte, else nothing.
    need_skip_ = false;
    head_offset_ = 0;
    first_line_offset_ = 0;
    end_ = std::numeric_limits<uint64_t>::max();
    eof_ = false;
    done_ = !(begin == 0 && end > 0);
    if (done_) return absl::OkStatus();
    PS_ASSIGN_OR_RETURN(decompressor_,
                        Decompressor::Create(file.compression, fd_, path_, file_size_));
  } else {
    end_ = std::min(end, file_size_);
    need_skip_ = begin > 0;
    head_offset_ = begin > 0 ? begin - 1 : 0;
    eof_ = head_offset_ >= file_size_;
    done_ = begin >= end_;
    first_line_offset_ = begin;
  }
  if (!done_) {
    (void)posix_fadvise(fd_, static_cast<off_t>(head_offset_), 0, POSIX_FADV_SEQUENTIAL);
  }
  return absl::OkStatus();
}

absl::Status LineReader::Fill() {
  if (head_ > 0) {
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  if (decompressor_ != nullptr) {
    const uint64_t before = decompressor_->compressed_bytes_read();
    absl::StatusOr<size_t> got = decompressor_->Read(buf_.data() + tail_, buf_.size() - tail_);
    bytes_read_ += decompressor_->compressed_bytes_read() - before;
    if (!got.ok()) return got.status();
    tail_ += *got;
    if (*got == 0) eof_ = true;
    return absl::OkStatus();
  }
  const uint64_t tail_offset = head_offset_ + tail_;
  const size_t want =
      static_cast<size_t>(std::min<uint64_t>(buf_.size() - tail_, file_size_ - tail_offset));
  PS_ASSIGN_OR_RETURN(size_t got, PreadFull(fd_, buf_.data() + tail_, want, tail_offset, path_));
  tail_ += got;
  bytes_read_ += got;
  if (got < want || tail_offset + got >= file_size_) eof_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> LineReader::SkipThroughNewline() {
  while (true) {
    const char* p = buf_.data() + head_;
    const void* nl = std::memchr(p, '\n', tail_ - head_);
    if (nl != nullptr) {
      Consume(static_cast<const char*>(nl) - p + 1);
      return true;
    }
    Consume(tail_ - head_);
    if (eof_) return false;
    PS_RETURN_IF_ERROR(Fill());
  }
}

absl::StatusOr<bool> LineReader::Next(Line* line) {
  if (done_) return false;
  if (need_skip_) {
    need_skip_ = false;
    PS_ASSIGN_OR_RETURN(bool found, SkipThroughNewline());
    first_line_offset_ = head_offset_;
    if (!found) {
      done_ = true;
      return false;
    }
  }
  while (true) {
    if (head_offset_ >= end_) {
      done_ = true;
      return false;
    }
    const char* p = buf_.data() + head_;
    const size_t avail = tail_ - head_;
    const void* nl = std::memchr(p + scanned_, '\n', avail - scanned_);
    if (nl != nullptr || (eof_ && avail > 0)) {
      size_t len = nl != nullptr ? static_cast<const char*>(nl) - p : avail;
      line->offset = head_offset_;
      line->index = next_index_++;
      line->overlong = len > max_line_bytes_;
      line->text = line->overlong ? std::string_view() : std::string_view(p, len);
      Consume(nl != nullptr ? len + 1 : len);
      scanned_ = 0;
      return true;
    }
    if (eof_) {
      done_ = true;
      return false;
    }
    if (avail > max_line_bytes_) {
      line->offset = head_offset_;
      line->index = next_index_++;
      line->overlong = true;
      line->text = std::string_view();
      Consume(avail);
      scanned_ = 0;
      PS_RETURN_IF_ERROR(SkipThroughNewline().status());
      return true;
    }
    scanned_ = avail;
    PS_RETURN_IF_ERROR(Fill());
  }
}

absl::StatusOr<int64_t> LineReader::LineNumber(const Line& line) {
  if (lines_before_range_ < 0) {
    PS_ASSIGN_OR_RETURN(lines_before_range_, LinesBefore(path_, first_line_offset_));
  }
  return lines_before_range_ + line.index + 1;
}

uint64_t LineReader::MaxLinesLeft() const {
  if (done_) return 0;
  if (decompressor_ != nullptr) return std::numeric_limits<uint64_t>::max();
  const uint64_t bytes = end_ > head_offset_ ? end_ - head_offset_ : 0;
  return bytes / 2 + 2;  // the last may be one byte without its newline
}

absl::StatusOr<int64_t> LinesBefore(const std::string& path, uint64_t offset) {
  if (offset == 0) return 0;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  int64_t count = 0;
  std::vector<char> chunk(size_t{1} << 20);
  absl::Status status;
  for (uint64_t off = 0; off < offset;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), offset - off));
    absl::StatusOr<size_t> got = PreadFull(fd, chunk.data(), want, off, path);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (*got == 0) break;
    count += std::count(chunk.data(), chunk.data() + *got, '\n');
    off += *got;
  }
  ::close(fd);
  if (!status.ok()) return status;
  return count;
}

}  // namespace pstrain::worker
