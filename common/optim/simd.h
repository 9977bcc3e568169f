// Internal to common/optim: a float vector type (8 lanes with AVX, else 4)
// and the one loop that runs an element-wise update rule over it.
//
// Why not plain loops left to the auto-vectorizer: GCC keeps errno semantics
// for sqrtf (we build without -ffast-math / -fno-math-errno), which stops it
// from vectorizing any loop that takes a square root, i.e. every adaptive
// optimizer. GCC vector extensions give explicit vector code that still
// compiles for any target (lowered to what the CPU has), and every element,
// the tail included, goes through the same vector arithmetic, so the result
// does not depend on an element's position or on the length.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>

namespace pstrain::optim::simd {

#if defined(__AVX__)
using Vec = float __attribute__((vector_size(32)));
#else
using Vec = float __attribute__((vector_size(16)));
#endif
constexpr size_t kWidth = sizeof(Vec) / sizeof(float);

inline Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, Vec v) { std::memcpy(p, &v, sizeof(v)); }

// First `n` (< kWidth) lanes from p, the rest zero.
inline Vec LoadPartial(const float* p, size_t n) {
  Vec v = {};
  std::memcpy(&v, p, n * sizeof(float));
  return v;
}
inline void StorePartial(float* p, Vec v, size_t n) { std::memcpy(p, &v, n * sizeof(float)); }

inline Vec Splat(float x) { return Vec{} + x; }

inline Vec Sqrt(Vec x) {
#if defined(__AVX__)
  return __builtin_ia32_sqrtps256(x);
#elif defined(__SSE__)
  return __builtin_ia32_sqrtps(x);
#else
  for (size_t i = 0; i < kWidth; ++i) x[i] = std::sqrt(x[i]);
  return x;
#endif
}

inline Vec Abs(Vec x) { return x < 0.0f ? -x : x; }

inline float HorizontalSum(Vec x) {
  float s = 0.0f;
  for (size_t i = 0; i < kWidth; ++i) s += x[i];
  return s;
}

// Runs `rule` over n elements. Rule has
//   Vec operator()(Vec w, Vec g, Vec* planes) const
// returning the new weights and updating the kPlanes state vectors in
// `planes` in place. Gradients arrive unscaled; the rule scales them.
// w_out may equal w_in (in place); state planes are `stride` floats apart.
template <size_t kPlanes, class Rule>
inline void RunElementwise(const Rule& rule, const float* w_in, float* w_out, float* state,
                           size_t stride, const float* grads, size_t n) {
  Vec planes[kPlanes > 0 ? kPlanes : 1];
  size_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    for (size_t k = 0; k < kPlanes; ++k) planes[k] = Load(state + k * stride + i);
    Vec w = rule(Load(w_in + i), Load(grads + i), planes);
    for (size_t k = 0; k < kPlanes; ++k) Store(state + k * stride + i, planes[k]);
    Store(w_out + i, w);
  }
  if (i < n) {
    size_t r = n - i;
    for (size_t k = 0; k < kPlanes; ++k) planes[k] = LoadPartial(state + k * stride + i, r);
    Vec w = rule(LoadPartial(w_in + i, r), LoadPartial(grads + i, r), planes);
    for (size_t k = 0; k < kPlanes; ++k) StorePartial(state + k * stride + i, planes[k], r);
    StorePartial(w_out + i, w, r);
  }
}

}  // namespace pstrain::optim::simd
