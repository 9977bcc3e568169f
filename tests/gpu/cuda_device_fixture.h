// The fixture of the CUDA device tests (cuda_device_test.cc,
// cuda_graph_ops_test.cc): a CUDA device beside the CPU reference, skipped
// naming why where there is no GPU (or no CUDA build), and device copies of
// host data kept alive by the fixture.
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/device.h"

namespace pstrain::worker::nn {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = CreateDevice("cuda");
    if (!gpu.ok()) {
      ASSERT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable) << gpu.status();
      GTEST_SKIP() << "no GPU: " << gpu.status();
    }
    gpu_ = std::move(*gpu);
    cpu_ = std::move(*CreateDevice("cpu"));
  }

  // A device copy of host data; kept alive by the fixture.
  template <class T>
  T* Up(const std::vector<T>& host) {
    buffers_.emplace_back();
    EXPECT_TRUE(buffers_.back().Reserve(gpu_.get(), sizeof(T) * std::max<size_t>(host.size(), 1)).ok());
    EXPECT_TRUE(gpu_->CopyToDevice(buffers_.back().data(), host.data(), sizeof(T) * host.size()).ok());
    return buffers_.back().as<T>();
  }
  std::vector<float> Down(const float* device, size_t n) {
    std::vector<float> host(n);
    EXPECT_TRUE(gpu_->CopyToHost(host.data(), device, sizeof(float) * n).ok());
    return host;
  }

  std::unique_ptr<Device> cpu_, gpu_;
  std::vector<DeviceBuffer> buffers_;
  std::mt19937 rng_{42};
};

}  // namespace pstrain::worker::nn
