// Decompressor: the decompressed bytes of one gzip or zstd file, streamed.
// It reads the file sequentially with pread(2) in fixed chunks, so its
// memory is bounded (one input chunk plus the codec's window: 32 KiB for
// gzip, at most 128 MiB for zstd, the library's default limit) whatever the
// file's size. A gzip file of several members and a zstd file of several
// frames decode as the concatenation of their members / frames.
//
// Corrupt data, and a file that ends inside a member or frame, are DataLoss
// errors naming the file and the decompressed byte offset where decoding
// stopped, e.g. "train.tsv.gz: corrupt gzip data at uncompressed byte 65536:
// invalid distance too far back". Owned and used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/file_set.h"

namespace pstrain::worker {

class Decompressor {
 public:
  // Decodes the first `file_size` bytes of `fd` (read from offset 0), which
  // must stay open while the Decompressor lives; `path` is for errors.
  // REQUIRES: compression != Compression::kNone. ResourceExhausted when the
  // codec cannot allocate its state.
  static absl::StatusOr<std::unique_ptr<Decompressor>> Create(Compression compression, int fd,
                                                             std::string path,
                                                             uint64_t file_size);

  virtual ~Decompressor() = default;
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  // Writes up to `n` decompressed bytes (as many as there are, up to `n`) to
  // `dst` and returns their count; 0 only at the end of the data.
  // REQUIRES: n > 0. Errors: DataLoss (above), the read error of the file;
  // the bytes decoded before an error are returned first, the error on the
  // next call, and on every call after it.
  absl::StatusOr<size_t> Read(char* dst, size_t n);

  uint64_t compressed_bytes_read() const { return in_offset_; }
  uint64_t decompressed_bytes() const { return out_bytes_; }

 protected:
  // `format` and `unit` name the codec and its parts in errors, e.g.
  // "gzip" and "member".
  Decompressor(int fd, std::string path, uint64_t file_size, const char* format,
               const char* unit);

  // Decodes from `in` (advancing it past what was used) into `dst`; returns
  // the bytes written, or the codec's message as an InvalidArgument error.
  struct Input {
    const char* data;
    size_t size;
  };
  virtual absl::StatusOr<size_t> Decode(Input* in, char* dst, size_t n) = 0;
  // True between members / frames, where the input may end.
  virtual bool AtBoundary() const = 0;

 private:
  absl::Status Refill();
  // Read()'s loop; `*out` counts the bytes written, also on error.
  absl::Status Decompress(char* dst, size_t n, size_t* out);

  const int fd_;
  const std::string path_;
  const uint64_t file_size_;
  const char* const format_;
  const char* const unit_;
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_end_ = 0;
  uint64_t in_offset_ = 0;  // file offset of in_[in_end_]
  bool input_eof_ = false;
  uint64_t out_bytes_ = 0;
  absl::Status failed_;  // sticky
};

}  // namespace pstrain::worker
