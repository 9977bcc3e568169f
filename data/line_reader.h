// LineReader: reads the lines of one file whose first byte lies in a byte
// range [begin, end) (see file_set.h for the sharding rule), with large
// buffered pread(2) calls and no per-line copies.
//
// A range starting mid-line skips to after the first newline at or past
// begin - 1, so that the line straddling `begin` belongs to the previous
// range; the last line owned may run past `end` and is read to its newline
// (or to the end of the file). Lines longer than max_line_bytes are never
// buffered whole: they come back flagged `overlong`, without their text.
//
// A compressed file (gzip, zstd; see file_set.h) is read whole, streamed
// through a Decompressor, when its range holds the file's first byte, and
// not at all otherwise. Its lines' offsets are offsets in the decompressed
// text (0 is the first line's), and its corrupt or truncated data is a
// DataLoss error naming the file (decompressor.h).
// Owned and used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/decompressor.h"
#include "data/file_set.h"

namespace pstrain::worker {

// The number of lines before offset `offset` of the plain file `path`
// (its '\n' bytes there): 0 at offset 0 without opening the file.
absl::StatusOr<int64_t> LinesBefore(const std::string& path, uint64_t offset);

class LineReader {
 public:
  struct Line {
    // Without the '\n'. Valid until the next call to Next() or Open().
    std::string_view text;
    uint64_t offset = 0;     // offset of the first byte, in the decompressed text
    int64_t index = 0;       // 0-based index among the lines of this range
    bool overlong = false;   // longer than max_line_bytes; text is empty
  };

  // The buffer holds max(buffer_bytes, 2 * max_line_bytes + 2) bytes, so
  // every read fetches at least max_line_bytes; it is allocated by the
  // first Open() (a scanner that reads only Parquet never needs it).
  LineReader(size_t buffer_bytes, size_t max_line_bytes);
  ~LineReader();

  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Starts reading the lines of `file` starting in [begin, end) (the whole
  // file or nothing when it is compressed). Only the first `file.size` bytes
  // are read. Errors: NotFound, PermissionDenied...
  absl::Status Open(const InputFile& file, uint64_t begin, uint64_t end);
  // The same for a plain file.
  absl::Status Open(const std::string& path, uint64_t file_size, uint64_t begin,
                    uint64_t end);
  void Close();

  // Fills `*line` and returns true, or returns false at the end of the range.
  absl::StatusOr<bool> Next(Line* line);

  // 1-based line number of `line` in its file. Costs a scan of the file up
  // to the range's first line the first time it is called for a range (no
  // scan for a compressed file, whose range starts at its first line).
  absl::StatusOr<int64_t> LineNumber(const Line& line);

  // Offset of the range's first line (final once Next() returned a line):
  // with Line::index, a line's place, for LinesBefore() later.
  uint64_t first_line_offset() const { return first_line_offset_; }

  // At least the number of lines Next() may still return (blank ones
  // aside): each takes two bytes or more. UINT64_MAX for a compressed file.
  uint64_t MaxLinesLeft() const;

  const std::string& path() const { return path_; }
  // Bytes read from files since construction (compressed bytes for a
  // compressed file).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  absl::Status Fill();
  // Discards bytes through the next '\n'; false when the file ends first.
  absl::StatusOr<bool> SkipThroughNewline();
  void Consume(size_t n) {
    head_ += n;
    head_offset_ += n;
  }

  const size_t max_line_bytes_;
  const size_t buffer_bytes_;
  std::vector<char> buf_;  // empty until the first Open()
  int fd_ = -1;
  std::string path_;
  std::unique_ptr<Decompressor> decompressor_;  // null for a plain file
  uint64_t file_size_ = 0;
  uint64_t end_ = 0;
  bool need_skip_ = false;
  bool done_ = true;
  bool eof_ = false;         // every byte of the file (or its text) is in the buffer
  size_t head_ = 0;          // first unconsumed byte in buf_
  size_t tail_ = 0;          // end of valid bytes in buf_
  size_t scanned_ = 0;       // bytes after head_ known to hold no '\n'
  uint64_t head_offset_ = 0; // offset of buf_[head_] in the (decompressed) text
  int64_t next_index_ = 0;
  uint64_t first_line_offset_ = 0;
  int64_t lines_before_range_ = -1;  // lazily computed for LineNumber()
  uint64_t bytes_read_ = 0;
};

}  // namespace pstrain::worker
