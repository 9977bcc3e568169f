// IEEE half (fp16) and bfloat16 conversions for compact embedding rows, in
// portable code (no F16C needed). Float -> half either rounds to nearest
// even or stochastically: `noise` bits added below the kept ones before
// truncation round up with probability equal to the dropped fraction, so a
// stream of updates smaller than one unit in the last place still moves a
// value by the right amount on average (the reason low-precision training
// keeps working; see Gupta et al., "Deep Learning with Limited Numerical
// Precision", 2015).
//
// fp16: 1 sign, 5 exponent, 10 mantissa bits; max 65504, values past it
// become infinity, below 2^-14 subnormal. bf16: fp32's exponent, 7 mantissa
// bits. NaN stays NaN (quiet).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace pstrain {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man x 2^-24.
    const float v = static_cast<float>(man) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// `stochastic`: round up with the probability of the dropped fraction
// (to 1/8192), using the low 13 bits of `noise`; else to nearest even.
inline uint16_t FloatToHalf(float f, bool stochastic = false, uint32_t noise = 0) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
  if (x < 0x38800000u) {
    // Below the smallest normal (2^-14): a multiple of 2^-24 (exact in
    // float: the scaled value is < 1024).
    const float units = std::bit_cast<float>(x) * 0x1p24f;
    uint32_t q = static_cast<uint32_t>(units);
    const float frac = units - static_cast<float>(q);
    if (stochastic) {
      q += frac > static_cast<float>(noise & 0x1fffu) * 0x1p-13f ? 1 : 0;
    } else if (frac > 0.5f || (frac == 0.5f && (q & 1))) {
      ++q;
    }
    return sign | static_cast<uint16_t>(q);  // 0x400 is the smallest normal: right
  }
  uint32_t y = x - (112u << 23);  // rebias the exponent (127 -> 15)
  y += stochastic ? (noise & 0x1fffu) : 0xfffu + ((y >> 13) & 1u);
  const uint32_t h = y >> 13;
  return sign | static_cast<uint16_t>(h >= 0x7c00u ? 0x7c00u : h);  // overflow: inf
}

inline float Bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

// `stochastic`: as FloatToHalf, with the low 16 bits of `noise`.
inline uint16_t FloatToBfloat16(float f, bool stochastic = false, uint32_t noise = 0) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  if ((x & 0x7f800000u) == 0x7f800000u) return static_cast<uint16_t>(x >> 16);  // inf
  x += stochastic ? (noise & 0xffffu) : 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// n floats to halves rounded to nearest even, and back (F16C 8 at a time
// where the build has it, e.g. x86-64-v3; the same values either way, a
// NaN's payload aside).
inline void FloatsToHalves(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

inline void HalvesToFloats(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

}  // namespace pstrain
