// Little-endian loads, bit unpacking and ULEB128 varints: the building
// blocks of the Parquet encodings. Every read is bounded by the size it is
// given; bits past the end read as zero (callers check that the values they
// need lie inside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pstrain::parquet {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the decoders assume a little-endian CPU");

template <typename T>
inline T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The `bit_width`-bit value (0..64) at bit offset `bit` of data[0, size),
// bits numbered from the least significant bit of the first byte.
inline uint64_t ReadBits(const uint8_t* data, size_t size, uint64_t bit, int bit_width) {
  if (bit_width == 0) return 0;
  const uint64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  uint64_t lo = 0;
  if (byte + 8 <= size) {
    lo = LoadLE<uint64_t>(data + byte);
  } else {
    for (uint64_t i = 0; i < 8 && byte + i < size; ++i) lo |= uint64_t{data[byte + i]} << (8 * i);
  }
  uint64_t v = lo >> shift;
  if (shift + bit_width > 64) {
    const uint64_t hi = byte + 8 < size ? data[byte + 8] : 0;
    v |= hi << (64 - shift);
  }
  return bit_width == 64 ? v : v & ((uint64_t{1} << bit_width) - 1);
}

// Reads a ULEB128 varint at data[*pos] (at most 10 bytes); false when the
// data ends first or it is longer than 64 bits.
inline bool ReadUleb128(const uint8_t* data, size_t size, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *pos < size; shift += 7) {
    const uint8_t b = data[(*pos)++];
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

inline int64_t ZigZagDecode(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Bits needed to hold values 0..max_value.
inline int BitWidth(uint64_t max_value) {
  return max_value == 0 ? 0 : 64 - __builtin_clzll(max_value);
}

}  // namespace pstrain::parquet
