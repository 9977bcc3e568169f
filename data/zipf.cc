#include "data/zipf.h"

#include <cmath>

namespace pstrain::worker {
namespace {

// log(1 + t) / t, continuous at t = 0.
double Log1pOverT(double t) {
  return std::abs(t) > 1e-8 ? std::log1p(t) / t : 1.0 - t * (0.5 - t / 3.0);
}

// (exp(t) - 1) / t, continuous at t = 0.
double Expm1OverT(double t) {
  return std::abs(t) > 1e-8 ? std::expm1(t) / t : 1.0 + t * (0.5 + t / 6.0);
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_const_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double ZipfSampler::H(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Expm1OverT((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double y) const {
  double t = y * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // guards rounding at the far end of the range
  return std::exp(Log1pOverT(t) * y);
}

}  // namespace pstrain::worker
