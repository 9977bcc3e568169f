#include "model/nn/device.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain::worker::nn {
namespace {

TEST(CreateDevice, CpuIsHostMemory) {
  auto device = CreateDevice("cpu");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE((*device)->host_memory());
  EXPECT_EQ((*device)->name(), "cpu");
}

TEST(CreateDevice, UnknownNameIsInvalidArgument) {
  EXPECT_EQ(CreateDevice("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateDevice("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateDevice, CudaIsUsableOrUnavailable) {
  auto device = CreateDevice("cuda");
  if (device.ok()) {
    EXPECT_FALSE((*device)->host_memory());
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
  }
}

TEST(DeviceBuffer, GrowsButNeverShrinks) {
  auto device = CreateDevice("cpu");
  ASSERT_TRUE(device.ok());
  DeviceBuffer buffer;
  ASSERT_TRUE(buffer.ReserveElements(device->get(), 100).ok());
  float* first = buffer.as();
  ASSERT_TRUE(buffer.ReserveElements(device->get(), 10).ok());
  EXPECT_EQ(buffer.as(), first);
  EXPECT_GE(buffer.capacity(), 400u);
  ASSERT_TRUE(buffer.ReserveElements(device->get(), 1000).ok());
  EXPECT_GE(buffer.capacity(), 4000u);
}

}  // namespace
}  // namespace pstrain::worker::nn
