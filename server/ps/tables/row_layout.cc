#include "server/ps/tables/row_layout.h"

#include <algorithm>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "common/half.h"
#include "common/hash.h"
#include "server/ps/tables/row_footprint.h"

namespace pstrain::server {

RowLayout::RowLayout(const TableSpec& spec, const optim::Optimizer& optimizer, bool meta)
    : dtype_(spec.dtype),
      dim_(spec.dim),
      compact_(spec.dtype != RowDtype::kFloat32),
      value_floats_(compact_ ? (dim_ + 1) / 2 : dim_),
      state_floats_(optimizer.StateFloats(spec.dim)),
      has_step_(optimizer.uses_step()),
      meta_offset_(value_floats_ + state_floats_ + (has_step_ ? 1 : 0)),
      stride_(RowStrideFloats(spec, optimizer, meta)) {}

void RowLayout::LoadValues(const float* row, float* out) const {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(row);
  if (dtype_ == RowDtype::kFloat16) {
    size_t c = 0;
#ifdef __F16C__
    for (; c + 8 <= dim_; c += 8) {
      _mm256_storeu_ps(out + c,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + c))));
    }
#endif
    for (; c < dim_; ++c) out[c] = HalfToFloat(v[c]);
  } else {
    for (size_t c = 0; c < dim_; ++c) out[c] = Bfloat16ToFloat(v[c]);
  }
}

void RowLayout::StoreValues(float* row, const float* in, uint64_t noise_seed,
                            bool stochastic) const {
  uint16_t* v = reinterpret_cast<uint16_t*>(row);
  if (!stochastic) {
    for (size_t c = 0; c < dim_; ++c) {
      v[c] = dtype_ == RowDtype::kFloat16 ? FloatToHalf(in[c]) : FloatToBfloat16(in[c]);
    }
    return;
  }
  // 16 noise bits per value, four values per 64-bit draw; fp16 drops 13
  // bits of an fp32 mantissa, bf16 16: the noise is cut to the bits dropped.
  uint32_t noise[4];
  auto draw = [&](size_t c) {
    const uint64_t n = Mix64(noise_seed + c);
    for (int k = 0; k < 4; ++k) noise[k] = static_cast<uint32_t>(n >> (16 * k)) & 0xffffu;
  };
  if (dtype_ == RowDtype::kBfloat16) {
    for (size_t c = 0; c < dim_; ++c) {
      if (c % 4 == 0) draw(c);
      v[c] = FloatToBfloat16(in[c], true, noise[c % 4]);
    }
    return;
  }
  size_t c = 0;
#ifdef __F16C__
  // Noise added below the 13 bits fp16 keeps, then truncation: stochastic
  // rounding for values in fp16's normal range (below 2^-14 the dropped
  // bits are more than 13 and the rounding leans towards zero by less
  // than 2^-24).
  for (; c + 8 <= dim_; c += 8) {
    alignas(32) uint32_t lanes[8];
    draw(c);
    for (int k = 0; k < 4; ++k) lanes[k] = noise[k] >> 3;
    draw(c + 4);
    for (int k = 0; k < 4; ++k) lanes[4 + k] = noise[k] >> 3;
    const __m256i bits = _mm256_add_epi32(_mm256_castps_si256(_mm256_loadu_ps(in + c)),
                                          _mm256_load_si256(reinterpret_cast<__m256i*>(lanes)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(v + c),
                     _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_ZERO));
  }
#endif
  for (; c < dim_; ++c) {
    if (c % 4 == 0) draw(c);
    v[c] = FloatToHalf(in[c], true, noise[c % 4] >> 3);
  }
}

void RowLayout::Write(float* row, std::span<const float> values, std::span<const float> state,
                      uint32_t step) const {
  if (compact_) {
    StoreValues(row, values.data(), /*noise_seed=*/0, /*stochastic=*/false);
  } else {
    std::copy(values.begin(), values.end(), row);
  }
  std::copy(state.begin(), state.end(), row + value_floats_);
  if (has_step_) set_step(row, step);
}

}  // namespace pstrain::server
