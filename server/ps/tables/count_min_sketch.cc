#include "server/ps/tables/count_min_sketch.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace pstrain::server {
namespace {

// Row seeds: independent hashes of the id per row.
constexpr uint64_t kRowSeed[CountMinSketch::kRows] = {
    0x8a5cd789635d2dffULL, 0x121fd2155c472f96ULL, 0x3b9a4de5c1f2a7b3ULL, 0xd1b54a32d192ed03ULL};

uint16_t SaturatingAdd(uint32_t a, uint32_t b) {
  return static_cast<uint16_t>(std::min<uint32_t>(a + b, CountMinSketch::kMaxCount));
}

}  // namespace

size_t CountMinSketch::WidthForBudget(size_t budget_bytes) {
  size_t per_row = budget_bytes / (kRows * sizeof(uint16_t));
  return std::max(kMinWidth, per_row < kMinWidth ? kMinWidth : std::bit_floor(per_row));
}

CountMinSketch::CountMinSketch(size_t width)
    : width_(std::bit_floor(std::max(width, kMinWidth))), cells_(kRows * width_, 0) {}

size_t CountMinSketch::Slot(int row, uint64_t id) const {
  return static_cast<size_t>(row) * width_ + (Mix64(id ^ kRowSeed[row]) & (width_ - 1));
}

uint16_t CountMinSketch::Count(uint64_t id) const {
  uint16_t m = kMaxCount;
  for (int r = 0; r < kRows; ++r) m = std::min(m, cells_[Slot(r, id)]);
  return m;
}

uint16_t CountMinSketch::Add(uint64_t id, uint32_t n) {
  size_t slot[kRows];
  uint16_t m = kMaxCount;
  for (int r = 0; r < kRows; ++r) {
    slot[r] = Slot(r, id);
    m = std::min(m, cells_[slot[r]]);
  }
  const uint16_t next = SaturatingAdd(m, n);
  for (int r = 0; r < kRows; ++r) cells_[slot[r]] = std::max(cells_[slot[r]], next);
  return next;
}

void CountMinSketch::MergeFrom(const CountMinSketch& other) {
  for (int r = 0; r < kRows; ++r) {
    uint16_t* dst = cells_.data() + static_cast<size_t>(r) * width_;
    const uint16_t* src = other.cells_.data() + static_cast<size_t>(r) * other.width_;
    if (other.width_ >= width_) {
      // Fold: old counter i held ids with hash low bits i; they now map to
      // i mod width_.
      for (size_t i = 0; i < other.width_; ++i) {
        dst[i & (width_ - 1)] = std::max(dst[i & (width_ - 1)], src[i]);
      }
    } else {
      // Spread: new counter i holds a subset of old counter i mod old width.
      for (size_t i = 0; i < width_; ++i) {
        dst[i] = std::max(dst[i], src[i & (other.width_ - 1)]);
      }
    }
  }
}

void CountMinSketch::Clear() { std::fill(cells_.begin(), cells_.end(), 0); }

absl::Status CountMinSketch::FromCells(std::span<const uint16_t> cells, CountMinSketch* out) {
  const size_t width = cells.size() / kRows;
  if (cells.size() % kRows != 0 || width < kMinWidth || !std::has_single_bit(width)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admission sketch of ", cells.size(), " counters is not ", kRows,
        " rows of a power-of-two width >= ", kMinWidth));
  }
  out->width_ = width;
  out->cells_.assign(cells.begin(), cells.end());
  return absl::OkStatus();
}

}  // namespace pstrain::server
