#include "data/parquet/rle_decoder.h"

#include "absl/strings/str_cat.h"

namespace pstrain::parquet {

absl::Status RleBitPackedDecoder::Truncated() const {
  return absl::DataLossError(
      absl::StrCat("RLE/bit-packed data ends before its values (", size_, " bytes)"));
}

absl::Status RleBitPackedDecoder::NextRun() {
  if (pos_ >= size_) return Truncated();
  uint64_t header;
  if (!ReadUleb128(data_, size_, &pos_, &header)) return Truncated();
  if (header & 1) {
    const uint64_t groups = header >> 1;
    // Bounds the count so that count * bit_width cannot overflow.
    if (groups > (uint64_t{1} << 48)) {
      return absl::DataLossError(absl::StrCat("bit-packed run of ", groups, " groups"));
    }
    const uint64_t bytes = groups * bit_width_;
    packed_ = data_ + pos_;
    packed_bytes_ = static_cast<size_t>(std::min<uint64_t>(bytes, size_ - pos_));
    pos_ += packed_bytes_;
    packed_next_ = 0;
    rle_ = false;
    left_ = groups * 8;
  } else {
    const size_t value_bytes = (bit_width_ + 7) / 8;
    if (value_bytes > size_ - pos_) return Truncated();
    uint64_t v = 0;
    for (size_t i = 0; i < value_bytes; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += value_bytes;
    value_ = v;
    rle_ = true;
    left_ = header >> 1;
  }
  return absl::OkStatus();
}

}  // namespace pstrain::parquet
