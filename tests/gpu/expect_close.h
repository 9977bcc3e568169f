// The GPU tests' agreement check: |gpu - cpu| <= tol (1 + |cpu|) per element.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::worker::nn {

inline void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu,
                 const std::string& what, double tol = 1e-4) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!(std::abs(gpu[i] - cpu[i]) <= tol * (1 + std::abs(cpu[i])))) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << " cpu " << cpu[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace pstrain::worker::nn
