// Optimizer kernels: the update rules that servers apply to pushed gradients
// (and that workers apply themselves in allreduce mode). One implementation
// per OptimizerKind (common/table_spec.h); each is a tight loop over a run of
// consecutive elements with the optimizer state stored next to it.
//
// State layout. A per-element optimizer keeps StatePlanes() planes (Adagrad:
// the accumulator; Adam: m, v; FTRL: z, n; SGD with momentum: the velocity);
// plane k of an update starts at `state + k * state_stride`. A sparse row of
// dim d stores its planes back to back (state_stride = d); a dense shard of
// length L stores whole planes (state_stride = L) and updates a sub-range by
// offsetting `state`. A row-wise optimizer keeps one float per update unit
// (a sparse row) and ignores state_stride.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/table_spec.h"

namespace pstrain::optim {

// One update of n consecutive elements.
struct UpdateArgs {
  const float* weights_in = nullptr;  // n weights before the update
  float* weights_out = nullptr;       // n weights after; equal to weights_in (in place)
                                      // or not overlapping it at all
  float* state = nullptr;             // optimizer state (see the file comment)
  size_t state_stride = 0;            // floats between state planes; >= n
  const float* grads = nullptr;       // n gradients, sums over samples
  size_t n = 0;
  float scale = 1.0f;                 // gradients are multiplied by this first
  float lr_scale = 1.0f;              // multiplies the configured learning rate
                                      // (warm-up, scaling with the worker count)
  uint64_t step = 1;                  // 1-based count of updates of these elements,
                                      // this one included (Adam's bias correction)
};

// A configured update rule. Immutable after Create(), so one instance may be
// shared by any number of threads; the arrays an update touches belong to the
// caller, who must not update the same elements from two threads at once.
class Optimizer {
 public:
  // Checks `config` (finite, in-range hyperparameters) and returns the
  // optimizer. InvalidArgument names the offending field.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config);
  static absl::Status Validate(const OptimizerConfig& config);

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const OptimizerConfig& config() const { return config_; }

  // Planes of per-element state (0 for stateless SGD). 0 for row-wise.
  virtual size_t StatePlanes() const = 0;
  // True when the state is one float per update unit instead of per element.
  virtual bool row_wise() const { return false; }
  // True when Apply reads UpdateArgs::step (Adam).
  virtual bool uses_step() const { return false; }
  // Floats of state for a unit of `n` elements stored contiguously.
  size_t StateFloats(size_t n) const { return row_wise() ? 1 : StatePlanes() * n; }

  // Writes the initial state of n elements (planes `state_stride` apart).
  virtual void InitState(float* state, size_t state_stride, size_t n) const;

  // Applies one update. REQUIRES: the pointers hold n valid floats (state as
  // described above); grads are finite (the caller checks).
  virtual void Apply(const UpdateArgs& args) const = 0;

 protected:
  explicit Optimizer(const OptimizerConfig& config) : config_(config) {}

 private:
  const OptimizerConfig config_;
};

// Name of an optimizer kind for messages, e.g. "adagrad".
const char* OptimizerKindName(OptimizerKind kind);

}  // namespace pstrain::optim
