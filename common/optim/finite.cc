#include "common/optim/finite.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pstrain::optim {
namespace {

constexpr uint32_t kExponentMask = 0x7f800000u;  // all ones: Inf or NaN

// True when some value in v[0, n) has an all-ones exponent. Branch-free so
// that GCC vectorizes it.
bool BlockHasNonFinite(const float* v, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & kExponentMask) == kExponentMask);
  }
  return bad != 0;
}

}  // namespace

size_t FindNonFinite(const float* v, size_t n) {
  constexpr size_t kBlock = 256;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    size_t len = n - begin < kBlock ? n - begin : kBlock;
    if (!BlockHasNonFinite(v + begin, len)) continue;
    for (size_t i = begin; i < begin + len; ++i) {
      if (!std::isfinite(v[i])) return i;
    }
  }
  return n;
}

}  // namespace pstrain::optim
