// Check macros for CUDA runtime and cuBLAS calls (host code only): a failing
// call returns an absl::Status naming file:line, the call's text and the
// library's error string, so a device fault reads like a backtrace.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker::nn {

inline absl::Status CudaCallError(const char* file, int line, const char* call,
                                  cudaError_t err) {
  std::string msg = absl::StrCat(file, ":", line, ": ", call, " failed: ",
                                 cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

inline absl::Status CublasCallError(const char* file, int line, const char* call,
                                    cublasStatus_t err) {
  std::string msg = absl::StrCat(file, ":", line, ": ", call, " failed: ",
                                 cublasGetStatusName(err), " (", cublasGetStatusString(err), ")");
  switch (err) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(msg);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(msg);
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace pstrain::worker::nn

// Returns the error Status of a failing CUDA runtime call.
#define PS_CUDA_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                \
    cudaError_t ps_cuda_err_ = (call);                                                \
    if (ps_cuda_err_ != cudaSuccess) {                                                \
      return ::pstrain::worker::nn::CudaCallError(__FILE__, __LINE__, #call, ps_cuda_err_); \
    }                                                                                 \
  } while (0)

// Returns the error Status of a failing cuBLAS call.
#define PS_CUBLAS_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                    \
    cublasStatus_t ps_cublas_err_ = (call);                                               \
    if (ps_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                        \
      return ::pstrain::worker::nn::CublasCallError(__FILE__, __LINE__, #call, ps_cublas_err_); \
    }                                                                                     \
  } while (0)
