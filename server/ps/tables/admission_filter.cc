#include "server/ps/tables/admission_filter.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace pstrain::server {

absl::StatusOr<std::unique_ptr<AdmissionFilter>> AdmissionFilter::Create(const TableSpec& spec) {
  const AdmissionConfig& a = spec.admission;
  if (a.min_count < 1 || a.min_count > CountMinSketch::kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table '", spec.name, "' (id ", spec.id,
                                                   "): min_count ", a.min_count, " is outside [1, ",
                                                   CountMinSketch::kMaxCount, "]"));
  }
  if (!(a.admit_probability > 0.0f && a.admit_probability <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table '", spec.name, "' (id ", spec.id,
                                                   "): admit_probability ", a.admit_probability,
                                                   " is outside (0, 1]"));
  }
  if (!a.enabled()) return std::make_unique<AdmitAll>();
  return std::make_unique<SketchAdmission>(a, spec.id);
}

SketchAdmission::SketchAdmission(const AdmissionConfig& config, uint64_t table_id)
    : admit_probability_(config.admit_probability),
      coin_(config.admit_probability < 1.0f),
      // min_count 1 with a coin: the coin alone decides.
      threshold_(config.min_count > 1 ? config.min_count : (coin_ ? UINT32_MAX : 1)),
      table_id_(table_id),
      sketch_(CountMinSketch::WidthForBudget(config.sketch_bytes)) {}

bool SketchAdmission::Admit(uint64_t id, uint32_t occurrences) {
  for (uint32_t k = 0; k < occurrences; ++k) {
    const uint16_t count = sketch_.Add(id);
    if (count >= threshold_) return true;
    // Deterministic per (table, id, occurrence): runs are reproducible.
    if (coin_ && UnitFloat(Mix64(Mix64(id ^ table_id_) + count)) < admit_probability_) {
      return true;
    }
  }
  return false;
}

}  // namespace pstrain::server
