// AdmissionFilter: which new ids a SparseTable gives a row (feature
// admission, spec.admission). The table asks it once for each id of a push
// that has no row yet; a refused id's gradients are dropped (and counted by
// the table), and a pull of an id without a row reads zeros, storing
// nothing. Ids that have a row are never asked about again.
//
//   AdmitAll         no admission: every id gets a row at once (the table
//                    then creates rows without asking, see admits_all()).
//   SketchAdmission  counts each id's occurrences in a count-min sketch and
//                    admits it on its min_count-th occurrence, or by a coin
//                    of admit_probability drawn per occurrence (either
//                    rule admits; with min_count 1 the coin alone decides,
//                    PERSIA's rule). The sketch is saved with checkpoints.
//
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "server/ps/tables/count_min_sketch.h"

namespace pstrain::server {

class AdmissionFilter {
 public:
  // The filter of `spec.admission`: AdmitAll when it admits every id.
  // InvalidArgument (naming the table) for min_count outside [1, 65535] or
  // admit_probability outside (0, 1].
  static absl::StatusOr<std::unique_ptr<AdmissionFilter>> Create(const TableSpec& spec);

  virtual ~AdmissionFilter() = default;

  // True when every id is admitted without being counted: the table may
  // create rows without calling Admit().
  virtual bool admits_all() const { return false; }

  // Whether `id`, which has no row, gets one; `occurrences`: how often it
  // occurs in the push (each occurrence counts). REQUIRES: occurrences >= 1.
  virtual bool Admit(uint64_t id, uint32_t occurrences) = 0;

  // The counts kept between pushes, saved with checkpoints; null when none.
  virtual const CountMinSketch* sketch() const { return nullptr; }
  // Adds saved counts (restore; several shards may add). No-op without a
  // sketch.
  virtual void MergeSketch(const CountMinSketch& saved) {}
  // Forgets every count.
  virtual void Clear() {}
  // Memory it holds (fixed at creation).
  virtual size_t bytes() const { return 0; }
};

// Admits every id (no admission).
class AdmitAll final : public AdmissionFilter {
 public:
  bool admits_all() const override { return true; }
  bool Admit(uint64_t, uint32_t) override { return true; }
};

// min_count and admit_probability over a count-min sketch of
// config.sketch_bytes. The coin is deterministic per (table, id,
// occurrence), so runs are reproducible.
class SketchAdmission final : public AdmissionFilter {
 public:
  // REQUIRES: config valid (AdmissionFilter::Create checks) and enabled().
  SketchAdmission(const AdmissionConfig& config, uint64_t table_id);

  bool Admit(uint64_t id, uint32_t occurrences) override;
  const CountMinSketch* sketch() const override { return &sketch_; }
  void MergeSketch(const CountMinSketch& saved) override { sketch_.MergeFrom(saved); }
  void Clear() override { sketch_.Clear(); }
  size_t bytes() const override { return sketch_.bytes(); }

 private:
  const float admit_probability_;
  const bool coin_;          // admit_probability < 1
  const uint32_t threshold_; // the count that admits (UINT32_MAX: none, the coin decides)
  const uint64_t table_id_;
  CountMinSketch sketch_;
};

}  // namespace pstrain::server
