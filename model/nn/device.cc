#include "model/nn/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/nn/cpu_device.h"

namespace pstrain::worker::nn {

#if PSTRAIN_WITH_CUDA
// Defined in cuda_device_cuda.cc.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal);
#endif

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& name) {
  if (name == "cpu") return CreateCpuDevice();
  int ordinal = 0;
  const std::string prefix = "cuda:";
  if (name != "cuda") {
    if (name.rfind(prefix, 0) != 0 ||
        !absl::SimpleAtoi(name.substr(prefix.size()), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown device '", name, "' (expected cpu, cuda or cuda:<n>)"));
    }
  }
#if PSTRAIN_WITH_CUDA
  return CreateCudaDevice(ordinal);
#else
  return absl::UnavailableError(
      absl::StrCat("device '", name, "': this build of pstrain has no CUDA support"));
#endif
}

}  // namespace pstrain::worker::nn
