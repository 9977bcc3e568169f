#include "data/decompressor.h"

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// Compressed bytes read from the file at a time.
constexpr size_t kInputChunk = size_t{256} << 10;

// gzip (RFC 1952) through zlib's inflate; after each member's end the
// stream is reset for the next member.
class GzipDecompressor final : public Decompressor {
 public:
  GzipDecompressor(int fd, std::string path, uint64_t file_size)
      : Decompressor(fd, std::move(path), file_size, "gzip", "member") {}
  ~GzipDecompressor() override {
    if (initialized_) inflateEnd(&z_);
  }

  absl::Status Init() {
    z_ = z_stream{};
    // 16 + 15: a gzip wrapper (only), the largest window.
    int rc = inflateInit2(&z_, 16 + MAX_WBITS);
    if (rc != Z_OK) return absl::ResourceExhaustedError(absl::StrCat("inflateInit2: ", zError(rc)));
    initialized_ = true;
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<size_t> Decode(Input* in, char* dst, size_t n) override {
    if (member_done_) {
      if (in->size == 0) return 0;
      inflateReset(&z_);
      member_done_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in->data));
    z_.avail_in = static_cast<uInt>(std::min<size_t>(in->size, UINT_MAX));
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
    const uInt avail_in = z_.avail_in, avail_out = z_.avail_out;
    int rc = inflate(&z_, Z_NO_FLUSH);
    const size_t used = avail_in - z_.avail_in;
    in->data += used;
    in->size -= used;
    if (used > 0) started_ = true;
    const size_t written = avail_out - z_.avail_out;
    if (rc == Z_STREAM_END) {
      member_done_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return absl::InvalidArgumentError(z_.msg != nullptr ? z_.msg : zError(rc));
    }
    return written;
  }

  bool AtBoundary() const override { return member_done_ || !started_; }

 private:
  z_stream z_{};
  bool initialized_ = false;
  bool started_ = false;      // some input was fed to the first member
  bool member_done_ = false;  // the last member decoded so far has ended
};

// Zstandard through a ZSTD_DStream, which moves on to the next frame by
// itself.
class ZstdDecompressor final : public Decompressor {
 public:
  ZstdDecompressor(int fd, std::string path, uint64_t file_size)
      : Decompressor(fd, std::move(path), file_size, "zstd", "frame") {}
  ~ZstdDecompressor() override { ZSTD_freeDCtx(dctx_); }

  absl::Status Init() {
    dctx_ = ZSTD_createDCtx();
    if (dctx_ == nullptr) return absl::ResourceExhaustedError("ZSTD_createDCtx failed");
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<size_t> Decode(Input* in, char* dst, size_t n) override {
    // Between frames, without input, the stream would wait for a header.
    if (frame_done_ && in->size == 0) return 0;
    ZSTD_inBuffer zin{in->data, in->size, 0};
    ZSTD_outBuffer zout{dst, n, 0};
    const size_t rc = ZSTD_decompressStream(dctx_, &zout, &zin);
    in->data += zin.pos;
    in->size -= zin.pos;
    if (ZSTD_isError(rc)) return absl::InvalidArgumentError(ZSTD_getErrorName(rc));
    frame_done_ = rc == 0;
    return zout.pos;
  }

  // 0 from ZSTD_decompressStream: a frame was decoded and flushed whole.
  bool AtBoundary() const override { return frame_done_; }

 private:
  ZSTD_DCtx* dctx_ = nullptr;
  bool frame_done_ = true;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Decompressor>> Decompressor::Create(Compression compression,
                                                                   int fd, std::string path,
                                                                   uint64_t file_size) {
  switch (compression) {
    case Compression::kGzip: {
      auto d = std::make_unique<GzipDecompressor>(fd, std::move(path), file_size);
      PS_RETURN_IF_ERROR(d->Init());
      return d;
    }
    case Compression::kZstd: {
      auto d = std::make_unique<ZstdDecompressor>(fd, std::move(path), file_size);
      PS_RETURN_IF_ERROR(d->Init());
      return d;
    }
    case Compression::kNone:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a compressed file"));
}

Decompressor::Decompressor(int fd, std::string path, uint64_t file_size, const char* format,
                           const char* unit)
    : fd_(fd),
      path_(std::move(path)),
      file_size_(file_size),
      format_(format),
      unit_(unit),
      in_(kInputChunk) {}

absl::Status Decompressor::Refill() {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(in_.size(), file_size_ - in_offset_));
  size_t got = 0;
  while (got < want) {
    ssize_t r = pread(fd_, in_.data() + got, want - got, static_cast<off_t>(in_offset_ + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return ErrnoToStatus(errno, absl::StrCat("read ", path_, " at offset ", in_offset_ + got));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  in_pos_ = 0;
  in_end_ = got;
  in_offset_ += got;
  if (got < want || in_offset_ >= file_size_) input_eof_ = true;
  return absl::OkStatus();
}

absl::StatusOr<size_t> Decompressor::Read(char* dst, size_t n) {
  PS_RETURN_IF_ERROR(failed_);
  size_t out = 0;
  absl::Status st = Decompress(dst, n, &out);
  if (st.ok()) return out;
  failed_ = st;
  // The bytes decoded before the error come first; the error on the next call.
  if (out > 0) return out;
  return st;
}

absl::Status Decompressor::Decompress(char* dst, size_t n, size_t* out) {
  while (*out < n) {
    if (in_pos_ == in_end_ && !input_eof_) PS_RETURN_IF_ERROR(Refill());
    Input in{in_.data() + in_pos_, in_end_ - in_pos_};
    absl::StatusOr<size_t> written = Decode(&in, dst + *out, n - *out);
    if (!written.ok()) {
      return absl::DataLossError(absl::StrCat(path_, ": corrupt ", format_,
                                              " data at uncompressed byte ", out_bytes_, ": ",
                                              written.status().message()));
    }
    const size_t used = static_cast<size_t>(in.data - (in_.data() + in_pos_));
    in_pos_ += used;
    *out += *written;
    out_bytes_ += *written;
    if (*written > 0 || used > 0) continue;
    if (in_pos_ < in_end_) {
      return absl::InternalError(absl::StrCat(path_, ": the ", format_,
                                              " decoder stalled at uncompressed byte ",
                                              out_bytes_));
    }
    if (!input_eof_) continue;
    // The decoder needs input, and the file has none left.
    if (!AtBoundary()) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated ", format_,
                                              " data at uncompressed byte ", out_bytes_,
                                              ": the file ends inside a ", format_, " ", unit_));
    }
    break;
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
