// ZipfSampler: exact samples of a Zipf distribution over ranks 1..n,
// P(k) proportional to k^-s, in O(1) expected time and O(1) memory (the
// rejection-inversion method of Hörmann and Derflinger, 1996), so fields
// with millions of values need no tables. Immutable after construction;
// thread-safe.
#pragma once

#include <cstdint>

namespace pstrain::worker {

class ZipfSampler {
 public:
  // REQUIRES: n >= 1, s > 0.
  ZipfSampler(uint64_t n, double s);

  // A rank in [1, n]. `uniform` supplies doubles in [0, 1); it is called
  // once per attempt (more than once only after a rejection, which is rare).
  template <typename Uniform>
  uint64_t Sample(Uniform&& uniform) const {
    while (true) {
      const double u = h_integral_n_ + uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = HIntegralInverse(u);
      uint64_t k = static_cast<uint64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      const double kd = static_cast<double>(k);
      if (kd - x <= s_const_ || u >= HIntegral(kd + 0.5) - H(kd)) return k;
    }
  }

  uint64_t n() const { return n_; }
  double exponent() const { return s_; }

 private:
  double H(double x) const;                 // x^-s
  double HIntegral(double x) const;         // integral of H from 1 to x
  double HIntegralInverse(double y) const;  // inverse of HIntegral

  uint64_t n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_const_;
};

}  // namespace pstrain::worker
