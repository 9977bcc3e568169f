// Test helpers: seeded random tensors and a finite-difference gradient
// check (central differences, float-appropriate tolerances) shared by the
// layer and model tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::worker::testing {

inline std::vector<float> RandomVector(size_t n, std::mt19937& rng, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct GradCheckOptions {
  double eps = 1e-2;
  double atol = 2e-3;
  double rtol = 2e-3;
  // Elements whose estimate changes when the step is halved (a ReLU kink
  // within eps) are skipped; at most this fraction of them may be.
  double max_skipped_fraction = 0.0;
};

// For each of the n floats at `p`: compares analytic[i] with the central
// difference of loss() around p[i]. Restores p.
inline void ExpectGradientMatches(const std::function<double()>& loss, float* p,
                                  const std::vector<float>& analytic, size_t n,
                                  const std::string& what, const GradCheckOptions& o = {}) {
  ASSERT_GE(analytic.size(), n) << what;
  size_t skipped = 0, failed = 0;
  // Central difference of loss() around p[i] with step h (exact float steps).
  auto central_difference = [&](size_t i, double h) {
    const float saved = p[i];
    const float up = static_cast<float>(saved + h), down = static_cast<float>(saved - h);
    p[i] = up;
    const double plus = loss();
    p[i] = down;
    const double minus = loss();
    p[i] = saved;
    return (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
  };
  for (size_t i = 0; i < n; ++i) {
    const double central = central_difference(i, o.eps);
    const double tol = o.atol + o.rtol * std::abs(central);
    if (o.max_skipped_fraction > 0) {
      // Smooth: halving the step changes the estimate by O(eps^2). A kink
      // within the step changes it by O(1): skip such elements.
      if (std::abs(central_difference(i, o.eps / 2) - central) > tol) {
        ++skipped;
        continue;
      }
    }
    if (std::abs(central - analytic[i]) > tol) {
      if (++failed <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric "
                      << central;
      }
    }
  }
  EXPECT_EQ(failed, 0u) << what;
  EXPECT_LE(static_cast<double>(skipped), o.max_skipped_fraction * static_cast<double>(n))
      << what << ": too many kinks";
}

}  // namespace pstrain::worker::testing
