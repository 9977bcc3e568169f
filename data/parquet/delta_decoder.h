// DeltaBinaryPackedDecoder: the DELTA_BINARY_PACKED encoding of INT32 and
// INT64 values (Encodings.md), which also holds the lengths of
// DELTA_LENGTH_BYTE_ARRAY and the prefix and suffix lengths of
// DELTA_BYTE_ARRAY.
//
// Layout: a header <block size> <miniblocks per block> <total value count>
// <first value (zigzag)>, all ULEB128; then blocks of <min delta (zigzag)>
// <one bit width byte per miniblock> <the miniblocks, each block_size /
// miniblocks deltas minus min delta, bit-packed>. Arithmetic wraps in 64
// bits; an INT32 column takes the low 32 bits of each value.
//
// The header's count is checked against what the caller allows before
// anything uses it, and nothing is allocated (the bit widths are read in
// place). Not thread-safe; the data must outlive the decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace pstrain::parquet {

class DeltaBinaryPackedDecoder {
 public:
  // Reads the header at the start of `data`. DataLoss when it is malformed
  // or claims more than `max_values` values.
  absl::Status Init(std::string_view data, int64_t max_values);

  // The header's value count.
  int64_t total() const { return total_; }
  int64_t decoded() const { return decoded_; }

  // Decodes the next `n` values into out[0, n). REQUIRES: decoded() + n <=
  // total(). DataLoss when the data ends first or a bit width is over 64.
  absl::Status Next(uint64_t* out, int64_t n);

  // Once every value was decoded: the offset in `data` just past the encoded
  // values (where, e.g., the bytes of DELTA_LENGTH_BYTE_ARRAY begin).
  size_t end() const { return pos_; }

 private:
  absl::Status StartMiniblock();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  uint64_t miniblocks_ = 0;            // per block
  uint64_t values_per_miniblock_ = 0;  // a multiple of 32
  int64_t total_ = 0;
  int64_t decoded_ = 0;
  uint64_t last_ = 0;  // the last value decoded
  // The current block and miniblock.
  uint64_t min_delta_ = 0;
  const uint8_t* bit_widths_ = nullptr;
  uint64_t miniblock_ = 0;  // index in the block; == miniblocks_: a new block is due
  int bit_width_ = 0;
  const uint8_t* packed_ = nullptr;
  size_t packed_bytes_ = 0;
  uint64_t in_miniblock_ = 0;  // deltas of the current miniblock read
};

}  // namespace pstrain::parquet
