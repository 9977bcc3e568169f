// Finiteness checks for gradient payloads: one vectorized pass that callers
// run before they mutate any state, so that a bad push changes nothing.
#pragma once

#include <cstddef>

namespace pstrain::optim {

// Index of the first NaN or infinity in v[0, n), or n when all are finite.
size_t FindNonFinite(const float* v, size_t n);

inline bool AllFinite(const float* v, size_t n) { return FindNonFinite(v, n) == n; }

}  // namespace pstrain::optim
