// The double-precision gradient check of the layer ops' tests
// (double_reference_*_test.cc): each test writes an op's forward again in
// plain double loops from its header's definition and compares the float
// op's backward with central differences of that forward. The ops' own tests
// (grad_check.h) difference the float forward, which forces a step of 1e-2
// and loose tolerances; in double a step of 1e-6 leaves truncation and
// rounding errors near 1e-10, so what remains is the float op's own rounding
// and the tolerance can be 1e-4 + 1e-4 |numeric|.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/tensor.h"

namespace pstrain::worker::nn::testing {

using Vec = std::vector<double>;

constexpr double kStep = 1e-6;                // central-difference step on the double reference
constexpr double kAtol = 1e-4, kRtol = 1e-4;  // float analytic vs double numeric
constexpr double kForwardTol = 1e-5;          // float forward vs double, times 1 + |y|
constexpr double kKinkClearance = 0.05;       // every ReLU input at least this far from 0
constexpr float kSentinel = 1e30f;            // fills the gaps between a view's rows

// Drawn as floats, so that the float op and the double reference see the
// same inputs exactly.
inline Vec Draw(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Magnitudes in [kKinkClearance, 1], random signs: ReLU inputs with no kink
// within a step.
inline Vec DrawClear(size_t n, std::mt19937& rng) {
  Vec v = Draw(n, rng, static_cast<float>(kKinkClearance), 1.0f);
  std::bernoulli_distribution negative(0.5);
  for (double& x : v) x = negative(rng) ? -x : x;
  return v;
}

inline bool ClearOfKinks(const Vec& pre) {
  return std::all_of(pre.begin(), pre.end(),
                     [](double v) { return std::abs(v) >= kKinkClearance; });
}

inline std::vector<float> F(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

inline double Dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// A rows x cols float matrix inside a wider buffer: rows start cols + pad
// floats apart, `pad` floats in, with a sentinel in the gaps. An op that
// ignores the stride reads the sentinel (and fails its forward check) or
// writes over it (and fails Get).
class Strided {
 public:
  Strided(int rows, int cols, int pad, const Vec& init = {})
      : rows_(rows),
        cols_(cols),
        pad_(pad),
        buf_(static_cast<size_t>(rows) * (cols + pad) + pad, kSentinel) {
    for (size_t e = 0; e < init.size(); ++e) buf_[Pos(e)] = static_cast<float>(init[e]);
  }

  MatrixView view() { return MatrixView(buf_.data() + pad_, rows_, cols_, cols_ + pad_); }
  // The view's elements, dense row-major.
  std::vector<float> Get() const {
    std::vector<float> out, rest = buf_;
    for (size_t e = 0; e < static_cast<size_t>(rows_) * cols_; ++e) {
      out.push_back(buf_[Pos(e)]);
      rest[Pos(e)] = kSentinel;
    }
    EXPECT_TRUE(std::all_of(rest.begin(), rest.end(), [](float v) { return v == kSentinel; }))
        << "an op wrote outside its strided view";
    return out;
  }

 private:
  size_t Pos(size_t e) const { return pad_ + e / cols_ * (cols_ + pad_) + e % cols_; }

  int rows_, cols_, pad_;
  std::vector<float> buf_;
};

inline void ExpectForwardMatches(const std::string& name, const std::vector<float>& got, const Vec& want) {
  ASSERT_EQ(got.size(), want.size()) << name;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > kForwardTol * (1.0 + std::abs(want[i])) && ++bad <= 5) {
      ADD_FAILURE() << name << "[" << i << "]: float " << got[i] << " vs double " << want[i];
    }
  }
}

// Keeps the largest error of a test's checks, |analytic - numeric| /
// (1 + |numeric|) (the tolerance is about 1e-4 on that scale), and reports
// it (printed and as the test's "max_err" property) for the closing note.
class DoubleReference : public ::testing::Test {
 protected:
  void TearDown() override {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3g", worst_);
    RecordProperty("max_err", text);
    std::printf("[  max err ] %s\n", text);
  }

  // For every element i of theta: the central difference of loss_ref()
  // around theta[i] (restored) against the float analytic[i].
  void ExpectMatchesDoubleDifferences(const std::string& name, Vec& theta,
                                      const std::function<double()>& loss_ref,
                                      const std::vector<float>& analytic) {
    ASSERT_EQ(theta.size(), analytic.size()) << name;
    double worst = 0.0;
    int failed = 0;
    for (size_t i = 0; i < theta.size(); ++i) {
      const double saved = theta[i], up = saved + kStep, down = saved - kStep;
      theta[i] = up;
      const double plus = loss_ref();
      theta[i] = down;
      const double minus = loss_ref();
      theta[i] = saved;
      const double numeric = (plus - minus) / (up - down);
      const double err = std::abs(analytic[i] - numeric);
      worst = std::max(worst, err / (1.0 + std::abs(numeric)));
      if (err > kAtol + kRtol * std::abs(numeric) && ++failed <= 5) {
        ADD_FAILURE() << name << "[" << i << "]: analytic " << analytic[i] << " vs numeric "
                      << numeric;
      }
    }
    EXPECT_EQ(failed, 0) << name;
    std::printf("  %-30s %4zu elements, max err %.2e\n", name.c_str(), theta.size(), worst);
    worst_ = std::max(worst_, worst);
  }

 private:
  double worst_ = 0.0;
};

}  // namespace pstrain::worker::nn::testing
