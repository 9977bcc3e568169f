#include "common/checksum.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "common/hash.h"

namespace pstrain {
namespace {
constexpr uint64_t kMul = 0x9fb21c651e98df25ULL;
inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
}  // namespace

void Checksum64::Block(const uint8_t* p) {
  for (int i = 0; i < 4; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    lanes_[i] = Rotl(lanes_[i] + w * kMul, 31) * 0x9e3779b97f4a7c15ULL;
  }
}

void Checksum64::Update(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (pending_size_ > 0) {
    size_t take = std::min(n, sizeof(pending_) - pending_size_);
    std::memcpy(pending_ + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    n -= take;
    if (pending_size_ < sizeof(pending_)) return;
    Block(pending_);
    pending_size_ = 0;
  }
  for (; n >= 32; n -= 32, p += 32) Block(p);
  std::memcpy(pending_, p, n);
  pending_size_ = n;
}

uint64_t Checksum64::Digest() const {
  uint64_t h = Mix64(total_);
  for (int i = 0; i < 4; ++i) h = Mix64(h ^ lanes_[i]);
  for (size_t i = 0; i < pending_size_; ++i) h = Mix64(h ^ (uint64_t{pending_[i]} << (8 * (i % 8))) ^ i);
  return h;
}

std::string Checksum64::Hex() const { return absl::StrFormat("%016x", Digest()); }

}  // namespace pstrain
