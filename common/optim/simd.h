// Internal to common/optim: an 8-float vector type and the one loop that runs
// an element-wise update rule over it.
//
// Why not plain loops left to the auto-vectorizer: GCC keeps errno semantics
// for sqrtf (we build without -ffast-math / -fno-math-errno), which stops it
// from vectorizing any loop that takes a square root, i.e. every adaptive
// optimizer. GCC vector extensions give explicit 8-wide code that still
// compiles for any target (lowered to what the CPU has), and every element,
// the tail included, goes through the same vector arithmetic, so the result
// does not depend on an element's position or on the length.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>

namespace pstrain::optim::simd {

using F8 = float __attribute__((vector_size(32)));
constexpr size_t kWidth = 8;

inline F8 Load(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, F8 v) { std::memcpy(p, &v, sizeof(v)); }

// First `n` (< 8) lanes from p, the rest zero.
inline F8 LoadPartial(const float* p, size_t n) {
  F8 v = {};
  std::memcpy(&v, p, n * sizeof(float));
  return v;
}
inline void StorePartial(float* p, F8 v, size_t n) { std::memcpy(p, &v, n * sizeof(float)); }

inline F8 Splat(float x) { return F8{} + x; }

inline F8 Sqrt(F8 x) {
#if defined(__AVX__)
  return __builtin_ia32_sqrtps256(x);
#else
  for (size_t i = 0; i < kWidth; ++i) x[i] = std::sqrt(x[i]);
  return x;
#endif
}

inline F8 Abs(F8 x) { return x < 0.0f ? -x : x; }

inline float HorizontalSum(F8 x) {
  float s = 0.0f;
  for (size_t i = 0; i < kWidth; ++i) s += x[i];
  return s;
}

// Runs `rule` over n elements. Rule has
//   F8 operator()(F8 w, F8 g, F8* planes) const
// returning the new weights and updating the kPlanes state vectors in
// `planes` in place. Gradients arrive unscaled; the rule scales them.
// w_out may equal w_in (in place); state planes are `stride` floats apart.
template <size_t kPlanes, class Rule>
inline void RunElementwise(const Rule& rule, const float* w_in, float* w_out, float* state,
                           size_t stride, const float* grads, size_t n) {
  F8 planes[kPlanes > 0 ? kPlanes : 1];
  size_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    for (size_t k = 0; k < kPlanes; ++k) planes[k] = Load(state + k * stride + i);
    F8 w = rule(Load(w_in + i), Load(grads + i), planes);
    for (size_t k = 0; k < kPlanes; ++k) Store(state + k * stride + i, planes[k]);
    Store(w_out + i, w);
  }
  if (i < n) {
    size_t r = n - i;
    for (size_t k = 0; k < kPlanes; ++k) planes[k] = LoadPartial(state + k * stride + i, r);
    F8 w = rule(LoadPartial(w_in + i, r), LoadPartial(grads + i, r), planes);
    for (size_t k = 0; k < kPlanes; ++k) StorePartial(state + k * stride + i, planes[k], r);
    StorePartial(w_out + i, w, r);
  }
}

}  // namespace pstrain::optim::simd
