#include "data/compress_file.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

// One gzip member or zstd frame, fed in pieces.
class Encoder {
 public:
  ~Encoder() {
    if (deflating_) deflateEnd(&z_);
    ZSTD_freeCCtx(cctx_);
  }

  static absl::StatusOr<std::unique_ptr<Encoder>> Create(Compression compression, int level) {
    auto e = std::unique_ptr<Encoder>(new Encoder());
    if (compression == Compression::kGzip) {
      if (level < -1 || level > 9) {
        return absl::InvalidArgumentError(absl::StrCat("gzip level ", level, " outside -1..9"));
      }
      if (deflateInit2(&e->z_, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return absl::ResourceExhaustedError("deflateInit2 failed");
      }
      e->deflating_ = true;
    } else if (compression == Compression::kZstd) {
      if (level < 1 || level > ZSTD_maxCLevel()) {
        return absl::InvalidArgumentError(
            absl::StrCat("zstd level ", level, " outside 1..", ZSTD_maxCLevel()));
      }
      e->cctx_ = ZSTD_createCCtx();
      if (e->cctx_ == nullptr) return absl::ResourceExhaustedError("ZSTD_createCCtx failed");
      ZSTD_CCtx_setParameter(e->cctx_, ZSTD_c_compressionLevel, level);
      ZSTD_CCtx_setParameter(e->cctx_, ZSTD_c_checksumFlag, 1);  // as the zstd tool does
    } else {
      return absl::InvalidArgumentError("not a compression format");
    }
    return e;
  }

  // Appends the compressed form of `in` to `*out`; `last` ends the stream.
  absl::Status Feed(std::string_view in, bool last, std::string* out) {
    do {  // zlib counts in 32 bits
      const std::string_view piece = in.substr(0, kChunk);
      in.remove_prefix(piece.size());
      const bool end = last && in.empty();
      PS_RETURN_IF_ERROR(deflating_ ? FeedGzip(piece, end, out) : FeedZstd(piece, end, out));
    } while (!in.empty());
    return absl::OkStatus();
  }

 private:
  Encoder() = default;

  absl::Status FeedGzip(std::string_view in, bool last, std::string* out) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    while (true) {
      const size_t old = out->size();
      out->resize(old + kChunk);
      z_.next_out = reinterpret_cast<Bytef*>(out->data() + old);
      z_.avail_out = static_cast<uInt>(kChunk);
      int rc = deflate(&z_, last ? Z_FINISH : Z_NO_FLUSH);
      out->resize(old + kChunk - z_.avail_out);
      if (rc == Z_STREAM_END) return absl::OkStatus();
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::InternalError(absl::StrCat("deflate: ", zError(rc)));
      }
      if (!last && z_.avail_in == 0 && z_.avail_out > 0) return absl::OkStatus();
    }
  }

  absl::Status FeedZstd(std::string_view in, bool last, std::string* out) {
    ZSTD_inBuffer zin{in.data(), in.size(), 0};
    while (true) {
      const size_t old = out->size();
      out->resize(old + kChunk);
      ZSTD_outBuffer zout{out->data() + old, kChunk, 0};
      size_t rc = ZSTD_compressStream2(cctx_, &zout, &zin, last ? ZSTD_e_end : ZSTD_e_continue);
      out->resize(old + zout.pos);
      if (ZSTD_isError(rc)) {
        return absl::InternalError(absl::StrCat("ZSTD_compressStream2: ", ZSTD_getErrorName(rc)));
      }
      if (last ? rc == 0 : zin.pos == zin.size) return absl::OkStatus();
    }
  }

  z_stream z_{};
  bool deflating_ = false;
  ZSTD_CCtx* cctx_ = nullptr;
};

absl::Status Write(std::FILE* f, const std::string& data, const std::string& path) {
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f) != data.size()) {
    return ErrnoToStatus(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

// Compresses the open `in` into the open `out`.
absl::Status Stream(std::FILE* in, const std::string& src, std::FILE* out, const std::string& tmp,
                    Encoder* encoder) {
  std::vector<char> buf(kChunk);
  std::string packed;
  while (true) {
    const size_t got = std::fread(buf.data(), 1, buf.size(), in);
    if (std::ferror(in)) return ErrnoToStatus(errno, absl::StrCat("read ", src));
    const bool last = got < buf.size();
    packed.clear();
    PS_RETURN_IF_ERROR(encoder->Feed(std::string_view(buf.data(), got), last, &packed));
    PS_RETURN_IF_ERROR(Write(out, packed, tmp));
    if (last) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<std::string> CompressBytes(std::string_view data, Compression compression,
                                          int level) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Encoder> encoder, Encoder::Create(compression, level));
  std::string out;
  PS_RETURN_IF_ERROR(encoder->Feed(data, true, &out));
  return out;
}

absl::Status CompressFile(const std::string& src, const std::string& dst, Compression compression,
                          int level) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Encoder> encoder, Encoder::Create(compression, level));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(src.c_str(), "rb"), &std::fclose);
  if (in == nullptr) return ErrnoToStatus(errno, absl::StrCat("open ", src));
  const std::string tmp = dst + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  if (out == nullptr) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  absl::Status st = Stream(in.get(), src, out, tmp, encoder.get());
  if (std::fclose(out) != 0 && st.ok()) st = ErrnoToStatus(errno, absl::StrCat("close ", tmp));
  if (st.ok() && std::rename(tmp.c_str(), dst.c_str()) != 0) {
    st = ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " to ", dst));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace pstrain::worker
