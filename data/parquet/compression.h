// Decompression of Parquet page bodies: UNCOMPRESSED, SNAPPY, GZIP, ZSTD,
// LZ4_RAW and BROTLI, through Debian's libraries. A page is decompressed in
// one call into a caller buffer of exactly the size its header states: a
// stream that gives more or fewer bytes is an error, so a corrupt page can
// never write past the buffer or make it grow. The deprecated LZ4 (Hadoop's
// framing) and LZO are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"

namespace pstrain::parquet {

// Codec contexts kept between pages (zstd's and zlib's), created on first
// use. Owned and used by one thread.
class CodecState {
 public:
  CodecState();
  ~CodecState();
  CodecState(const CodecState&) = delete;
  CodecState& operator=(const CodecState&) = delete;

  struct Contexts;
  Contexts* contexts() { return contexts_.get(); }

 private:
  std::unique_ptr<Contexts> contexts_;
};

// OK for the codecs above; Unimplemented naming the codec for LZ4 (Hadoop),
// LZO and unknown numbers.
absl::Status CheckCodecSupported(int32_t codec);

// Decompresses `in` (one page body) into out[0, out_size). DataLoss when the
// data is corrupt or does not decompress to exactly out_size bytes, e.g.
// "snappy data is corrupt"; ResourceExhausted when a context cannot be made.
// REQUIRES: CheckCodecSupported(codec).ok().
absl::Status Decompress(int32_t codec, std::string_view in, char* out, size_t out_size,
                        CodecState* state);

}  // namespace pstrain::parquet
