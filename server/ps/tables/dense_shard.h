// DenseShard: the range [offset, offset + length) of a dense table held by
// one server, with its optimizer state.
//
// Pulls are zero-copy: Snapshot() returns a Buffer that shares ownership of
// the current weight array, so the transport can send it while the shard
// goes on. The shard never writes memory that a live snapshot may be
// reading: when the weight array is shared, Push writes the updated weights
// out of place into another array (recycled from a small pool, so large
// tables do not page-fault on every step) and makes it current; when it is
// not shared, Push updates in place. Either way a push is one pass.
//
// Offsets are table coordinates: `begin` arguments lie in
// [offset(), offset() + length()).
//
// Optimizer: a dense shard is a run of elements, so row-wise Adagrad (whose
// "row" is a sparse row) runs as per-element Adagrad, which is what it is
// for rows of one element. Adam's step count is one per shard, counting
// pushes that start at the shard's first element: the pieces of a push cut
// into contiguous ranges (sent in order) count once.
//
// Not thread-safe, except that Buffers returned by Snapshot may be read and
// released on any thread: a shard has one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/optim/optimizer.h"
#include "common/table_spec.h"

namespace pstrain::server {

class DenseShard {
 public:
  // InvalidArgument when `spec` is not a dense table, when the range is
  // empty or not inside [0, spec.size), or for a bad optimizer/initializer.
  static absl::StatusOr<std::unique_ptr<DenseShard>> Create(const TableSpec& spec,
                                                            uint64_t offset, uint64_t length);
  ~DenseShard();

  DenseShard(const DenseShard&) = delete;
  DenseShard& operator=(const DenseShard&) = delete;

  const TableSpec& spec() const { return spec_; }
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }
  // Pushes applied that started at the shard's first element (Adam's step
  // count).
  uint64_t step() const { return step_; }
  // Changes on every Push and Restore: workers re-pull when it moved.
  uint64_t version() const { return version_; }

  // The weights [begin, begin + len) as floats, sharing the current array.
  // The Buffer stays valid and unchanged however long it is kept.
  // OutOfRange when the range is not inside the shard.
  absl::StatusOr<Buffer> Snapshot(uint64_t begin, uint64_t len) const;

  // Applies gradients for [begin, begin + grads.size()), multiplied by
  // `scale`. OutOfRange when the range is not inside the shard;
  // InvalidArgument, with the shard unchanged, for a non-finite scale or
  // gradient. An empty push changes nothing.
  absl::Status Push(uint64_t begin, std::span<const float> grads, float scale, float lr_scale = 1.0f);

  // Checkpoint access. The spans stay valid until the next non-const call.
  std::span<const float> weights() const;
  // state_floats() floats: StatePlanes() planes of length() floats.
  std::span<const float> state() const { return state_; }
  size_t state_floats() const { return state_.size(); }

  // Replaces weights, state and step (checkpoint restore). InvalidArgument
  // for wrong sizes; outstanding snapshots keep the old weights.
  absl::Status Restore(std::span<const float> weights, std::span<const float> state,
                       uint64_t step);

  // Freed weight arrays waiting for reuse (for tests).
  size_t pooled_arrays() const;

 private:
  class ArrayPool;
  struct Array;

  DenseShard(const TableSpec& spec, uint64_t offset, uint64_t length,
             std::unique_ptr<optim::Optimizer> optimizer);

  absl::Status CheckRange(const char* what, uint64_t begin, uint64_t len) const;
  // True when no snapshot shares weights_, so it may be written in place.
  bool WeightsExclusive() const;

  const TableSpec spec_;
  const uint64_t offset_;
  const uint64_t length_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const std::shared_ptr<ArrayPool> pool_;  // shared with every Array

  std::shared_ptr<Array> weights_;  // length_ floats; shared with snapshots
  std::vector<float> state_;
  uint64_t step_ = 0;
  uint64_t version_ = 0;
};

}  // namespace pstrain::server
