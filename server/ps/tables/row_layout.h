// RowLayout: where the parts of a SparseTable row lie in its floats, and the
// conversions of a compact row's values. A row is
//   [values][optimizer state floats][step count: Adam only]
//   [last use clock, use count and tier flags: with eviction or a disk tier]
// The values are dim floats, or with dtype fp16/bf16 dim 16-bit values
// padded to a float (common/half.h; the state stays fp32), converted on each
// pull and push (an update rounded stochastically). The same bytes are what
// a disk tier stores (disk_tier.h). RowStrideFloats (row_footprint.h) gives
// the stride, so that `pstrain plan` sizes rows as the table lays them out.
//
// Immutable after construction: thread-safe. The row pointers passed in are
// the caller's (RowStore's arena, or a buffer of a row read from disk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/optim/optimizer.h"
#include "common/table_spec.h"

namespace pstrain::server {

class RowLayout {
 public:
  // `meta`: rows carry the two metadata words (eviction or a disk tier).
  RowLayout(const TableSpec& spec, const optim::Optimizer& optimizer, bool meta);

  size_t dim() const { return dim_; }
  // fp16/bf16 values (spec.dtype): dim 16-bit values in value_floats().
  bool compact() const { return compact_; }
  size_t value_floats() const { return value_floats_; }
  size_t state_floats() const { return state_floats_; }
  // Adam: a step count after the state.
  bool has_step() const { return has_step_; }
  // Floats before the metadata words (valid with `meta` only).
  size_t meta_offset() const { return meta_offset_; }
  size_t stride() const { return stride_; }
  size_t row_bytes() const { return stride_ * sizeof(float); }

  float* state(float* row) const { return row + value_floats_; }
  const float* state(const float* row) const { return row + value_floats_; }
  // The step count of a row (0 without has_step()).
  uint32_t step(const float* row) const {
    uint32_t s = 0;
    if (has_step_) std::memcpy(&s, row + value_floats_ + state_floats_, sizeof(s));
    return s;
  }
  // REQUIRES: has_step().
  void set_step(float* row, uint32_t s) const {
    std::memcpy(row + value_floats_ + state_floats_, &s, sizeof(s));
  }
  uint32_t* meta(float* row) const { return reinterpret_cast<uint32_t*>(row + meta_offset_); }
  const uint32_t* meta(const float* row) const {
    return reinterpret_cast<const uint32_t*>(row + meta_offset_);
  }

  // Compact rows: the dim values of `row` as fp32 (`out` holds dim floats),
  // and back: rounded to nearest, or (stochastic) with rounding noise drawn
  // from noise_seed. REQUIRES: compact().
  void LoadValues(const float* row, float* out) const;
  void StoreValues(float* row, const float* in, uint64_t noise_seed, bool stochastic) const;

  // Writes values (dim floats, stored as the dtype says), state
  // (state_floats()) and step into `row`; the metadata is left as it is.
  void Write(float* row, std::span<const float> values, std::span<const float> state,
             uint32_t step) const;

 private:
  const RowDtype dtype_;
  const size_t dim_;
  const bool compact_;
  const size_t value_floats_;
  const size_t state_floats_;
  const bool has_step_;
  const size_t meta_offset_;
  const size_t stride_;
};

}  // namespace pstrain::server
