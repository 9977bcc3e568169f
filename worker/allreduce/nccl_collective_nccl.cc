#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "model/nn/cuda_check_cuda.h"
#include "worker/allreduce/nccl_collective.h"

namespace pstrain::worker {
namespace {

// How often Complete() polls the stream: a bucket's allreduce takes hundreds
// of microseconds, so 50 us adds little latency and leaves the core idle.
constexpr std::chrono::microseconds kStreamPollInterval(50);
// How often the group's non-blocking initialization is polled: it takes
// milliseconds to seconds.
constexpr std::chrono::milliseconds kInitPollInterval(1);

absl::Status NcclCallError(const char* file, int line, const char* call, ncclResult_t r) {
  std::string msg =
      absl::StrCat(file, ":", line, ": ", call, " failed: ", ncclGetErrorString(r));
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

#define PS_NCCL_RETURN_IF_ERROR(call)                                          \
  do {                                                                         \
    ncclResult_t ps_nccl_r_ = (call);                                          \
    if (ps_nccl_r_ != ncclSuccess && ps_nccl_r_ != ncclInProgress) {           \
      return NcclCallError(__FILE__, __LINE__, #call, ps_nccl_r_);             \
    }                                                                          \
  } while (0)

class NcclCollective final : public Collective {
 public:
  NcclCollective(NcclOptions options, ncclComm_t comm, cudaStream_t stream, float* scratch)
      : options_(std::move(options)), comm_(comm), stream_(stream), scratch_(scratch) {}

  ~NcclCollective() override {
    if (comm_ != nullptr) {
      if (broken_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  const char* name() const override { return "nccl"; }

  absl::Status AllReduce(float* data, size_t n, ReduceOp op) override {
    if (broken_) return absl::FailedPreconditionError("nccl group failed earlier");
    PS_RETURN_IF_ERROR(Device());
    PS_NCCL_RETURN_IF_ERROR(ncclAllReduce(data, data, n, ncclFloat,
                                          op == ReduceOp::kSum ? ncclSum : ncclAvg, comm_,
                                          stream_));
    return Complete("allreduce");
  }

  absl::Status Broadcast(float* data, size_t n, int root) override {
    if (broken_) return absl::FailedPreconditionError("nccl group failed earlier");
    PS_RETURN_IF_ERROR(Device());
    PS_NCCL_RETURN_IF_ERROR(ncclBroadcast(data, data, n, ncclFloat, root, comm_, stream_));
    return Complete("broadcast");
  }

  absl::Status Barrier() override {
    if (broken_) return absl::FailedPreconditionError("nccl group failed earlier");
    PS_RETURN_IF_ERROR(Device());
    PS_NCCL_RETURN_IF_ERROR(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_));
    return Complete("barrier");
  }

 private:
  absl::Status Device() {
    PS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return absl::OkStatus();
  }

  // Waits for the stream, polling NCCL's asynchronous errors, up to the
  // deadline; aborts the communicator on failure.
  absl::Status Complete(const char* what) {
    absl::Time deadline = absl::Now() + options_.timeout;
    while (true) {
      cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) {
        return Fail(what, nn::CudaCallError(__FILE__, __LINE__, "cudaStreamQuery", q));
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        return Fail(what, NcclCallError(__FILE__, __LINE__, "ncclCommGetAsyncError", async));
      }
      if (absl::Now() > deadline) {
        return Fail(what, absl::DeadlineExceededError(absl::StrCat(
                              "not done after ", absl::FormatDuration(options_.timeout))));
      }
      std::this_thread::sleep_for(kStreamPollInterval);
    }
  }

  absl::Status Fail(const char* what, const absl::Status& cause) {
    broken_ = true;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    std::string blame;
    if (options_.probe) {
      std::vector<int> dead = options_.probe();
      if (!dead.empty()) blame = absl::StrCat("; rank(s) ", absl::StrJoin(dead, ", "), " not responding");
    }
    return absl::Status(cause.code(), absl::StrCat("nccl ", what, " failed on rank ", options_.rank,
                                                   " of ", options_.size, blame, ": ",
                                                   cause.message()));
  }

  NcclOptions options_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  float* scratch_;
  bool broken_ = false;
};

}  // namespace

bool NcclBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options,
                                                                 RendezvousStore* store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", options.rank, " outside a group of ", options.size));
  }
  PS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  ncclUniqueId id;
  const std::string key = options.prefix + "/unique_id";
  if (options.rank == 0) {
    PS_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    PS_RETURN_IF_ERROR(store->Set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    PS_ASSIGN_OR_RETURN(std::string bytes, store->Get(key, options.timeout));
    if (bytes.size() != sizeof(id)) return absl::DataLossError("nccl unique id of the wrong size");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  cudaStream_t stream = nullptr;
  PS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* scratch = nullptr;
  PS_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch, sizeof(float)));
  // Non-blocking initialization, so that a missing peer ends at the deadline.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  PS_NCCL_RETURN_IF_ERROR(ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config));
  absl::Time deadline = absl::Now() + options.timeout;
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || absl::Now() > deadline) {
      ncclCommAbort(comm);
      cudaFree(scratch);
      cudaStreamDestroy(stream);
      if (state != ncclInProgress) return NcclCallError(__FILE__, __LINE__, "ncclCommInitRankConfig", state);
      return absl::DeadlineExceededError(absl::StrCat("nccl: rank ", options.rank, " of ",
                                                      options.size, " could not form the group in ",
                                                      absl::FormatDuration(options.timeout)));
    }
    std::this_thread::sleep_for(kInitPollInterval);
  }
  return std::unique_ptr<Collective>(new NcclCollective(options, comm, stream, scratch));
}

}  // namespace pstrain::worker
