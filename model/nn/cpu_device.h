// The host CPU as a Device: every op calls the CPU layer function of the same
// name synchronously, and device memory is host memory (aligned). Not
// thread-safe (one model per instance), like every Device.
#pragma once

#include <memory>

#include "model/nn/device.h"

namespace pstrain::worker::nn {

// Also limits the BLAS library to one thread.
std::unique_ptr<Device> CreateCpuDevice();

}  // namespace pstrain::worker::nn
