// RleBitPackedDecoder: the RLE / bit-packing hybrid of Parquet
// (Encodings.md), which holds definition and repetition levels, dictionary
// indices and RLE-encoded booleans. A sequence of runs, each a ULEB128
// header: an even header h is h/2 copies of one value stored in
// ceil(bit_width/8) bytes; an odd one is (h/2)*8 values bit-packed,
// bit_width bits each, least significant bit first. The data carries no
// count: the caller asks for as many values as it knows there are.
//
// A bit-packed run cut short by the end of the data is accepted as long as
// the values asked for lie inside it. Nothing is allocated. Not thread-safe;
// the data must outlive the decoder.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "data/parquet/bit_util.h"

namespace pstrain::parquet {

class RleBitPackedDecoder {
 public:
  RleBitPackedDecoder() = default;
  // REQUIRES: 0 <= bit_width <= 32.
  RleBitPackedDecoder(const uint8_t* data, size_t size, int bit_width)
      : data_(data), size_(size), bit_width_(bit_width) {}

  // Decodes the next `n` values into out[0, n). DataLoss when the data ends
  // first or a run header is malformed. Values are not range-checked: the
  // caller checks them (a level against its maximum, an index against the
  // dictionary); a value is truncated to T.
  template <typename T>
  absl::Status Get(T* out, int64_t n) {
    while (n > 0) {
      if (left_ == 0) {
        absl::Status st = NextRun();
        if (!st.ok()) return st;
        continue;
      }
      const int64_t m = static_cast<int64_t>(std::min<uint64_t>(left_, n));
      if (rle_) {
        std::fill(out, out + m, static_cast<T>(value_));
      } else if (const int64_t fast = FastGroups(m); fast > 0) {
        // Whole groups of 8 with the width a constant (UnpackGroups).
        UnpackGroups(packed_ + packed_next_ / 8 * bit_width_, fast, out);
        packed_next_ += 8 * fast;
        out += 8 * fast;
        n -= 8 * fast;
        left_ -= 8 * fast;
        continue;
      } else {
        const uint64_t end_bit = (packed_next_ + m) * static_cast<uint64_t>(bit_width_);
        if (end_bit > uint64_t{packed_bytes_} * 8) return Truncated();
        uint64_t bit = packed_next_ * bit_width_;
        for (int64_t i = 0; i < m; ++i, bit += bit_width_) {
          out[i] = static_cast<T>(ReadBits(packed_, packed_bytes_, bit, bit_width_));
        }
        packed_next_ += m;
      }
      out += m;
      n -= m;
      left_ -= m;
    }
    return absl::OkStatus();
  }

 private:
  // The groups of 8 values of the bit-packed run, at most m / 8, that can be
  // unpacked with unchecked 8-byte loads from the next value on (which must
  // start a group): 0 when none.
  int64_t FastGroups(int64_t m) const {
    if (bit_width_ == 0 || bit_width_ > 32 || packed_next_ % 8 != 0 || m < 8) return 0;
    const uint64_t w = static_cast<uint64_t>(bit_width_);
    const uint64_t start = packed_next_ / 8 * w;
    if (packed_bytes_ < start) return 0;
    // Whole groups inside the run, whose loads (group g's end before byte
    // (g + 1) * w + 8 from the first) stay inside the data.
    const uint64_t readable = static_cast<uint64_t>(data_ + size_ - (packed_ + start));
    if (readable < w + 8) return 0;
    const uint64_t groups = std::min({static_cast<uint64_t>(m / 8), (packed_bytes_ - start) / w,
                                      (readable - 8) / w});
    return static_cast<int64_t>(groups);
  }
  template <int W, typename T>
  static void UnpackGroupsOf(const uint8_t* p, int64_t groups, T* out) {
    constexpr uint64_t kMask = (uint64_t{1} << W) - 1;
    for (int64_t g = 0; g < groups; ++g, p += W, out += 8) {
      for (int k = 0; k < 8; ++k) {
        out[k] = static_cast<T>((LoadLE<uint64_t>(p + k * W / 8) >> (k * W % 8)) & kMask);
      }
    }
  }
  template <typename T, int... W>
  void UnpackGroupsDispatch(const uint8_t* p, int64_t groups, T* out,
                            std::integer_sequence<int, W...>) const {
    // Width w + 1 takes the (w)th instantiation.
    using Fn = void (*)(const uint8_t*, int64_t, T*);
    static constexpr Fn kFns[] = {&UnpackGroupsOf<W + 1, T>...};
    kFns[bit_width_ - 1](p, groups, out);
  }
  template <typename T>
  void UnpackGroups(const uint8_t* p, int64_t groups, T* out) const {
    UnpackGroupsDispatch(p, groups, out, std::make_integer_sequence<int, 32>());
  }

  absl::Status NextRun();
  absl::Status Truncated() const;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  int bit_width_ = 0;
  // The current run: `left_` values remain.
  bool rle_ = true;
  uint64_t left_ = 0;
  uint64_t value_ = 0;               // RLE run
  const uint8_t* packed_ = nullptr;  // bit-packed run
  size_t packed_bytes_ = 0;
  uint64_t packed_next_ = 0;  // index in the run of the next value
};

}  // namespace pstrain::parquet
