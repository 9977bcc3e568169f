#include "data/parquet/delta_decoder.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/parquet/bit_util.h"

namespace pstrain::parquet {
namespace {

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(absl::StrCat("DELTA_BINARY_PACKED: ", std::string(what)));
}

}  // namespace

absl::Status DeltaBinaryPackedDecoder::Init(std::string_view data, int64_t max_values) {
  *this = DeltaBinaryPackedDecoder();
  data_ = reinterpret_cast<const uint8_t*>(data.data());
  size_ = data.size();
  uint64_t block_size, miniblocks, total, first;
  if (!ReadUleb128(data_, size_, &pos_, &block_size) ||
      !ReadUleb128(data_, size_, &pos_, &miniblocks) || !ReadUleb128(data_, size_, &pos_, &total) ||
      !ReadUleb128(data_, size_, &pos_, &first)) {
    return Corrupt("truncated header");
  }
  if (block_size == 0 || block_size % 128 != 0 || block_size > (uint64_t{1} << 31) ||
      miniblocks == 0 || block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0) {
    return Corrupt(
        absl::StrCat("invalid block size ", block_size, " with ", miniblocks, " miniblocks"));
  }
  if (total > static_cast<uint64_t>(max_values)) {
    return Corrupt(
        absl::StrCat("header claims ", total, " values, the page holds at most ", max_values));
  }
  miniblocks_ = miniblocks;
  values_per_miniblock_ = block_size / miniblocks;
  total_ = static_cast<int64_t>(total);
  last_ = static_cast<uint64_t>(ZigZagDecode(first));
  miniblock_ = miniblocks_;
  return absl::OkStatus();
}

absl::Status DeltaBinaryPackedDecoder::StartMiniblock() {
  if (miniblock_ + 1 >= miniblocks_ || bit_widths_ == nullptr) {
    // A new block: its min delta and bit widths.
    uint64_t min_delta;
    if (!ReadUleb128(data_, size_, &pos_, &min_delta)) return Corrupt("truncated block header");
    if (miniblocks_ > size_ - pos_) return Corrupt("truncated block header");
    min_delta_ = static_cast<uint64_t>(ZigZagDecode(min_delta));
    bit_widths_ = data_ + pos_;
    pos_ += miniblocks_;
    miniblock_ = 0;
  } else {
    ++miniblock_;
  }
  bit_width_ = bit_widths_[miniblock_];
  if (bit_width_ > 64) return Corrupt(absl::StrCat("bit width ", bit_width_));
  // The miniblock is stored whole, also the last one; a last one cut short
  // is accepted when the values it must hold are inside.
  const uint64_t bytes = values_per_miniblock_ * bit_width_ / 8;
  packed_ = data_ + pos_;
  packed_bytes_ = static_cast<size_t>(std::min<uint64_t>(bytes, size_ - pos_));
  const uint64_t needed = std::min<uint64_t>(values_per_miniblock_, total_ - decoded_);
  if ((needed * bit_width_ + 7) / 8 > packed_bytes_) return Corrupt("truncated miniblock");
  pos_ += packed_bytes_;
  in_miniblock_ = 0;
  return absl::OkStatus();
}

absl::Status DeltaBinaryPackedDecoder::Next(uint64_t* out, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  if (n > total_ - decoded_) return Corrupt("more values asked for than the header holds");
  int64_t i = 0;
  if (decoded_ == 0) {  // the first value is in the header
    out[i++] = last_;
    ++decoded_;
  }
  while (i < n) {
    if (packed_ == nullptr || in_miniblock_ == values_per_miniblock_) {
      absl::Status st = StartMiniblock();
      if (!st.ok()) return st;
    }
    const int64_t m =
        std::min<int64_t>(n - i, static_cast<int64_t>(values_per_miniblock_ - in_miniblock_));
    uint64_t bit = in_miniblock_ * bit_width_;
    uint64_t v = last_;
    for (int64_t k = 0; k < m; ++k, bit += bit_width_) {
      v += min_delta_ + ReadBits(packed_, packed_bytes_, bit, bit_width_);
      out[i + k] = v;
    }
    last_ = v;
    in_miniblock_ += m;
    i += m;
    decoded_ += m;
  }
  return absl::OkStatus();
}

}  // namespace pstrain::parquet
