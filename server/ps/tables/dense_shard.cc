#include "server/ps/tables/dense_shard.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/optim/finite.h"
#include "common/optim/initializer.h"
#include "common/status.h"

namespace pstrain::server {

// Freed weight arrays of one shard's length, kept for reuse (at most
// kMaxPooled; the rest are freed). Arrays come back when their last owner
// (the shard or a snapshot) lets go, on whatever thread that is, so the pool
// is thread-safe; every Array holds a reference to it.
class DenseShard::ArrayPool {
 public:
  explicit ArrayPool(size_t floats)
      : bytes_(std::max<size_t>(64, (floats * sizeof(float) + 63) / 64 * 64)) {}

  ~ArrayPool() {
    for (float* p : free_) std::free(p);
  }

  // An array of the pool's length, contents unspecified.
  float* Get() {
    {
      absl::MutexLock lock(&mu_);
      if (!free_.empty()) {
        float* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    void* p = std::aligned_alloc(64, bytes_);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<float*>(p);
  }

  void Put(float* p) {
    {
      absl::MutexLock lock(&mu_);
      if (free_.size() < kMaxPooled) {
        free_.push_back(p);
        return;
      }
    }
    std::free(p);
  }

  size_t pooled() const {
    absl::MutexLock lock(&mu_);
    return free_.size();
  }

 private:
  static constexpr size_t kMaxPooled = 2;

  const size_t bytes_;
  mutable absl::Mutex mu_;
  std::vector<float*> free_ ABSL_GUARDED_BY(mu_);
};

// One weight array and the number of live snapshots reading it. Snapshots
// hold the Array (so it outlives the shard if need be) and decrement
// `readers` with release order when they die; the shard reads it with
// acquire order before writing in place, so those reads happen before.
struct DenseShard::Array {
  explicit Array(std::shared_ptr<ArrayPool> p) : pool(std::move(p)), data(pool->Get()) {}
  ~Array() { pool->Put(data); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  const std::shared_ptr<ArrayPool> pool;
  float* const data;
  std::atomic<int64_t> readers{0};
};

absl::StatusOr<std::unique_ptr<DenseShard>> DenseShard::Create(const TableSpec& spec,
                                                               uint64_t offset, uint64_t length) {
  std::string what = absl::StrCat("dense table '", spec.name, "' (id ", spec.id, ")");
  if (spec.kind != TableKind::kDense) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": spec is not a dense table"));
  }
  if (length == 0 || offset > spec.size || length > spec.size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shard [", offset, ", ",
                                                   offset + length, ") is empty or not inside [0, ",
                                                   spec.size, ")"));
  }
  OptimizerConfig config = spec.optimizer;
  if (config.kind == OptimizerKind::kRowwiseAdagrad) config.kind = OptimizerKind::kAdagrad;
  auto optimizer = optim::Optimizer::Create(config);
  if (!optimizer.ok()) return Annotate(optimizer.status(), what);
  auto initializer = optim::Initializer::Create(spec.init, spec.id);
  if (!initializer.ok()) return Annotate(initializer.status(), what);

  std::unique_ptr<DenseShard> shard(
      new DenseShard(spec, offset, length, *std::move(optimizer)));
  initializer->FillRange(offset, shard->weights_->data, length);
  return shard;
}

DenseShard::DenseShard(const TableSpec& spec, uint64_t offset, uint64_t length,
                       std::unique_ptr<optim::Optimizer> optimizer)
    : spec_(spec),
      offset_(offset),
      length_(length),
      optimizer_(std::move(optimizer)),
      pool_(std::make_shared<ArrayPool>(length)),
      weights_(std::make_shared<Array>(pool_)),
      state_(optimizer_->StateFloats(length)) {
  if (!state_.empty()) optimizer_->InitState(state_.data(), length_, length_);
}

DenseShard::~DenseShard() = default;

size_t DenseShard::pooled_arrays() const { return pool_->pooled(); }

std::span<const float> DenseShard::weights() const { return {weights_->data, length_}; }

absl::Status DenseShard::CheckRange(const char* what, uint64_t begin, uint64_t len) const {
  if (begin >= offset_ && begin - offset_ <= length_ && len <= length_ - (begin - offset_)) {
    return absl::OkStatus();
  }
  return absl::OutOfRangeError(absl::StrCat("dense table '", spec_.name, "': ", what, " of ", len,
                                            " floats at offset ", begin,
                                            " is outside this shard [", offset_, ", ",
                                            offset_ + length_, ")"));
}

bool DenseShard::WeightsExclusive() const {
  return weights_->readers.load(std::memory_order_acquire) == 0;
}

absl::StatusOr<Buffer> DenseShard::Snapshot(uint64_t begin, uint64_t len) const {
  PS_RETURN_IF_ERROR(CheckRange("pull", begin, len));
  const float* p = weights_->data + (begin - offset_);
  weights_->readers.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<const void> owner(p, [array = weights_](const void*) {
    array->readers.fetch_sub(1, std::memory_order_release);
  });
  return Buffer(p, len * sizeof(float), std::move(owner));
}

absl::Status DenseShard::Push(uint64_t begin, std::span<const float> grads, float scale,
                              float lr_scale) {
  PS_RETURN_IF_ERROR(CheckRange("push", begin, grads.size()));
  if (!std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat("dense table '", spec_.name,
                                                   "': non-finite gradient scale ", scale));
  }
  const size_t bad = optim::FindNonFinite(grads.data(), grads.size());
  if (bad != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dense table '", spec_.name,
                                                   "': non-finite gradient ", grads[bad],
                                                   " at offset ", begin + bad));
  }
  if (grads.empty()) return absl::OkStatus();

  const size_t off = begin - offset_;
  const size_t n = grads.size();
  float* current = weights_->data;
  std::shared_ptr<Array> fresh;
  float* out = current;
  if (!WeightsExclusive()) {
    // Copy-on-write: the untouched parts are copied, the pushed range is
    // written by the optimizer itself, so each element is written once.
    fresh = std::make_shared<Array>(pool_);
    out = fresh->data;
    std::memcpy(out, current, off * sizeof(float));
    std::memcpy(out + off + n, current + off + n, (length_ - off - n) * sizeof(float));
  }
  optim::UpdateArgs args;
  args.weights_in = current + off;
  args.weights_out = out + off;
  args.state = state_.empty() ? nullptr : state_.data() + off;
  args.state_stride = length_;
  args.grads = grads.data();
  args.n = n;
  args.scale = scale;
  args.lr_scale = lr_scale;
  // A push that starts at the shard's first element opens a step; the
  // other pieces of a push sent in pieces (KvRequest::partial) share it.
  if (off == 0 || step_ == 0) ++step_;
  args.step = step_;
  optimizer_->Apply(args);
  if (fresh) weights_ = std::move(fresh);
  ++version_;
  return absl::OkStatus();
}

absl::Status DenseShard::Restore(std::span<const float> weights, std::span<const float> state,
                                 uint64_t step) {
  if (weights.size() != length_ || state.size() != state_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense table '", spec_.name, "': restore of ", weights.size(), " weights and ",
        state.size(), " state floats, the shard at offset ", offset_, " has ", length_, " and ",
        state_.size()));
  }
  if (!WeightsExclusive()) weights_ = std::make_shared<Array>(pool_);
  std::copy(weights.begin(), weights.end(), weights_->data);
  std::copy(state.begin(), state.end(), state_.begin());
  step_ = step;
  ++version_;
  return absl::OkStatus();
}

}  // namespace pstrain::server
