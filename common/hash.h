// Stable 64-bit hashing: identical in every process, build and run (unlike
// absl::Hash, which is seeded per process). Used for feature ids, row
// ownership and deterministic initializers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace pstrain {

// A strong 64-bit finalizer (splitmix64's). Bijective.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Hash of a byte string with a seed: 8 bytes at a time through Mix64.
inline uint64_t HashBytes(std::string_view s, uint64_t seed) {
  uint64_t h = Mix64(seed ^ (s.size() * 0x9ddfea08eb382d69ULL));
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = Mix64(h ^ w);
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = Mix64(h ^ w ^ 0xff00000000000000ULL);
  }
  return h;
}

// Uniform float in [0, 1) from 64 random bits.
inline float UnitFloat(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace pstrain
