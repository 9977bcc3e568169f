#include "data/parquet/compression.h"

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "data/parquet/types.h"

namespace pstrain::parquet {

struct CodecState::Contexts {
  ZSTD_DCtx* zstd = nullptr;
  z_stream zlib{};
  bool zlib_ready = false;

  ~Contexts() {
    ZSTD_freeDCtx(zstd);
    if (zlib_ready) inflateEnd(&zlib);
  }
};

CodecState::CodecState() : contexts_(std::make_unique<Contexts>()) {}
CodecState::~CodecState() = default;

namespace {

absl::Status SizeMismatch(const char* codec, size_t got, size_t want) {
  return absl::DataLossError(
      absl::StrCat(codec, " data decompresses to ", got, " bytes, the page header says ", want));
}

absl::Status Snappy(std::string_view in, char* out, size_t out_size) {
  size_t length = 0;
  if (snappy_uncompressed_length(in.data(), in.size(), &length) != SNAPPY_OK) {
    return absl::DataLossError("snappy data is corrupt");
  }
  if (length != out_size) return SizeMismatch("snappy", length, out_size);
  if (snappy_uncompress(in.data(), in.size(), out, &length) != SNAPPY_OK || length != out_size) {
    return absl::DataLossError("snappy data is corrupt");
  }
  return absl::OkStatus();
}

// gzip (RFC 1952) as the format says, zlib streams as some writers produce
// (inflate tells them apart); several members decode one after another.
absl::Status Gzip(std::string_view in, char* out, size_t out_size, CodecState::Contexts* c) {
  if (in.size() > UINT_MAX || out_size > UINT_MAX) {
    return absl::DataLossError("gzip page larger than 4 GiB");
  }
  z_stream& z = c->zlib;
  if (!c->zlib_ready) {
    z = z_stream{};
    if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) {
      return absl::ResourceExhaustedError("inflateInit2 failed");
    }
    c->zlib_ready = true;
  } else {
    inflateReset(&z);
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(out_size);
  while (true) {
    const int rc = inflate(&z, Z_FINISH);
    if (rc == Z_STREAM_END) {
      if (z.avail_out == 0 || z.avail_in == 0) break;
      inflateReset(&z);  // another member follows
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && z.avail_out == 0) {
      return absl::DataLossError(absl::StrCat("gzip data decompresses to more than the ", out_size,
                                              " bytes the page header says"));
    }
    if (rc == Z_BUF_ERROR) return absl::DataLossError("gzip data is truncated");
    return absl::DataLossError(
        absl::StrCat("gzip data is corrupt: ", z.msg != nullptr ? z.msg : zError(rc)));
  }
  const size_t got = out_size - z.avail_out;
  if (got != out_size) return SizeMismatch("gzip", got, out_size);
  return absl::OkStatus();
}

absl::Status Zstd(std::string_view in, char* out, size_t out_size, CodecState::Contexts* c) {
  if (c->zstd == nullptr) {
    c->zstd = ZSTD_createDCtx();
    if (c->zstd == nullptr) return absl::ResourceExhaustedError("ZSTD_createDCtx failed");
  }
  const size_t rc = ZSTD_decompressDCtx(c->zstd, out, out_size, in.data(), in.size());
  if (ZSTD_isError(rc)) {
    return absl::DataLossError(absl::StrCat("zstd data is corrupt: ", ZSTD_getErrorName(rc)));
  }
  if (rc != out_size) return SizeMismatch("zstd", rc, out_size);
  return absl::OkStatus();
}

absl::Status Lz4Raw(std::string_view in, char* out, size_t out_size) {
  if (in.size() > INT_MAX || out_size > INT_MAX) {
    return absl::DataLossError("LZ4_RAW page larger than 2 GiB");
  }
  const int rc =
      LZ4_decompress_safe(in.data(), out, static_cast<int>(in.size()), static_cast<int>(out_size));
  if (rc < 0) return absl::DataLossError("LZ4_RAW data is corrupt");
  if (static_cast<size_t>(rc) != out_size) return SizeMismatch("LZ4_RAW", rc, out_size);
  return absl::OkStatus();
}

absl::Status Brotli(std::string_view in, char* out, size_t out_size) {
  size_t got = out_size;
  const BrotliDecoderResult rc =
      BrotliDecoderDecompress(in.size(), reinterpret_cast<const uint8_t*>(in.data()), &got,
                              reinterpret_cast<uint8_t*>(out));
  if (rc != BROTLI_DECODER_RESULT_SUCCESS) {
    // Also when the output would not fit in out_size.
    return absl::DataLossError("brotli data is corrupt or larger than the page header says");
  }
  if (got != out_size) return SizeMismatch("brotli", got, out_size);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCodecSupported(int32_t codec) {
  switch (static_cast<Codec>(codec)) {
    case Codec::kUncompressed:
    case Codec::kSnappy:
    case Codec::kGzip:
    case Codec::kZstd:
    case Codec::kLz4Raw:
    case Codec::kBrotli: return absl::OkStatus();
    case Codec::kLz4:
      return absl::UnimplementedError(
          "LZ4 compression (the deprecated Hadoop framing) is not supported; rewrite the file "
          "with LZ4_RAW or ZSTD");
    case Codec::kLzo: return absl::UnimplementedError("LZO compression is not supported");
  }
  return absl::UnimplementedError(absl::StrCat(CodecName(codec), " is not supported"));
}

absl::Status Decompress(int32_t codec, std::string_view in, char* out, size_t out_size,
                        CodecState* state) {
  switch (static_cast<Codec>(codec)) {
    case Codec::kUncompressed:
      if (in.size() != out_size) return SizeMismatch("uncompressed", in.size(), out_size);
      if (out_size > 0) std::memcpy(out, in.data(), out_size);
      return absl::OkStatus();
    case Codec::kSnappy: return Snappy(in, out, out_size);
    case Codec::kGzip: return Gzip(in, out, out_size, state->contexts());
    case Codec::kZstd: return Zstd(in, out, out_size, state->contexts());
    case Codec::kLz4Raw: return Lz4Raw(in, out, out_size);
    case Codec::kBrotli: return Brotli(in, out, out_size);
    default: return CheckCodecSupported(codec);
  }
}

}  // namespace pstrain::parquet
