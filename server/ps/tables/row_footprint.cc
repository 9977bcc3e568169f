#include "server/ps/tables/row_footprint.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/ps/tables/row_arena.h"
#include "server/ps/tables/row_index.h"

namespace pstrain::server {
namespace {

// fp16/bf16 values: two to a float.
size_t ValueFloats(const TableSpec& spec) {
  return spec.dtype == RowDtype::kFloat32 ? spec.dim : (spec.dim + 1) / 2;
}

}  // namespace

size_t RowStrideFloats(const TableSpec& spec, const optim::Optimizer& optimizer, bool tiered) {
  return ValueFloats(spec) + optimizer.StateFloats(spec.dim) + (optimizer.uses_step() ? 1 : 0) +
         (tiered ? 2 : 0);
}

absl::StatusOr<RowFootprint> RowFootprintOf(const TableSpec& spec, bool tiered) {
  if (spec.kind != TableKind::kSparse || spec.dim == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", spec.name, " is not a sparse table with rows"));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> optimizer,
                      optim::Optimizer::Create(spec.optimizer));
  RowFootprint f;
  f.stride_floats = RowStrideFloats(spec, *optimizer, tiered);
  const size_t state_floats =
      optimizer->StateFloats(spec.dim) + (optimizer->uses_step() ? 1 : 0);
  f.value_bytes = static_cast<double>(ValueFloats(spec) * sizeof(float));
  f.state_bytes = static_cast<double>(state_floats * sizeof(float));
  f.meta_bytes = tiered ? 2.0 * sizeof(float) : 0.0;
  f.slack_bytes = RowArena::BytesPerRow(f.stride_floats) -
                  static_cast<double>(f.stride_floats * sizeof(float));
  f.index_bytes = RowIndex::kMaxBytesPerId;
  return f;
}

}  // namespace pstrain::server
